// Opens a report page in Debian's headless Chromium (playwright-core, no browser download) and
// prints what a reader's browser did: console errors, page errors, every request the page made
// beyond its own file, and the rendered size. Writes a full-page screenshot when asked.
//   node open_report.mjs REPORT.html [SCREENSHOT.png]
import { chromium } from "playwright-core";
import { pathToFileURL } from "node:url";

const [page_path, screenshot] = process.argv.slice(2);
const own = pathToFileURL(page_path).href;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],  // playwright gives the browser a fresh temporary profile of its own
});
const result = { console_errors: [], page_errors: [], requests: [], svgs: 0, tables: 0, height: 0 };
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on("console", (message) => {
    if (message.type() === "error" || message.type() === "warning") result.console_errors.push(message.text());
  });
  page.on("pageerror", (error) => result.page_errors.push(String(error)));
  await page.route("**/*", (route) => {
    const url = route.request().url();
    if (url === own) return route.continue();
    result.requests.push(url);
    return route.abort();
  });
  await page.goto(own, { waitUntil: "load" });
  result.svgs = await page.locator("svg").count();
  result.tables = await page.locator("table").count();
  result.height = await page.evaluate(() => document.documentElement.scrollHeight);
  result.title = await page.title();
  if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
