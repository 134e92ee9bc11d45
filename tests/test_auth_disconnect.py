"""A password check queued for a client that has gone is dropped before it takes the bcrypt thread
(issue 20): over a real uvicorn socket, a guess sent and closed at once costs no check, while a
client that stays is still checked and its body still reaches the app."""

from __future__ import annotations

import base64
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import bcrypt
import httpx
from conftest import guarded_server
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse

from exporter.web.auth_admission import CheckPool
from exporter.web.webconfig import BasicAuthMiddleware, PasswordChecker

HASH = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=4)).decode()


class CountingChecker(PasswordChecker):
    """The real checker; each password bcrypt is asked about is noted, and "hold…" waits for
    `release` so that the next check has to queue behind it."""

    def __init__(self) -> None:
        super().__init__({"prometheus": HASH})
        self.checked: list[bytes] = []
        self.release = threading.Event()

    def verify(self, user: str, password: bytes) -> bool:
        self.checked.append(password)
        if password.startswith(b"hold"):
            self.release.wait(30)
        return super().verify(user, password)


class Users:
    def __init__(self, checker: PasswordChecker) -> None:
        self.checker = checker

    def password_checker(self) -> PasswordChecker | None:
        return self.checker


class CountingPool(CheckPool):
    def __init__(self) -> None:
        super().__init__(cpu_share=1.0)
        self.admitted = 0

    def _admit(self, job: object) -> bool:
        self.admitted += 1
        return super()._admit(job)  # type: ignore[arg-type]


def _app() -> FastAPI:
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request) -> PlainTextResponse:
        return PlainTextResponse(f"{len(await request.body())} bytes")

    @app.get("/metrics")
    def metrics() -> PlainTextResponse:
        return PlainTextResponse("ok\n")

    return app


def _request(password: str) -> bytes:
    token = base64.b64encode(f"prometheus:{password}".encode()).decode()
    return f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {token}\r\n\r\n".encode()


def _until(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_guess_whose_client_left_costs_no_bcrypt_and_a_client_that_stays_is_checked() -> None:
    checker = CountingChecker()
    pool = CountingPool()
    with guarded_server(BasicAuthMiddleware(_app(), Users(checker), pool=pool)) as served:
        holder = socket.create_connection(("127.0.0.1", served.port), timeout=30)
        holder.sendall(_request("hold"))  # takes the bcrypt thread until released
        assert _until(lambda: checker.checked == [b"hold"])
        leaver = socket.create_connection(("127.0.0.1", served.port), timeout=5)
        leaver.sendall(_request("guess"))
        leaver.close()  # gone before its check's turn
        dropped = _until(lambda: pool.admitted == 2 and pool.pending == 0)
        checker.release.set()
        assert holder.recv(65536).startswith(b"HTTP/1.1 401")
        holder.close()
        assert dropped, "the guess of a client that left still waited when the held check ended"
        assert checker.checked == [b"hold"]

        # a client that stays waits its turn, and the body read while it waited reaches the app
        checker.release = threading.Event()
        holder = socket.create_connection(("127.0.0.1", served.port), timeout=30)
        holder.sendall(_request("hold-2"))  # a new one: "hold" is answered from the cache now
        assert _until(lambda: checker.checked == [b"hold", b"hold-2"])
        with ThreadPoolExecutor(1) as pool_of_one:
            posted = pool_of_one.submit(
                httpx.post,
                f"{served.url}/echo",
                auth=("prometheus", "right"),
                content=b"x" * 100_000,
                timeout=30,
            )
            assert _until(lambda: pool.pending == 1)
            checker.release.set()
            answer = posted.result()
        assert holder.recv(65536).startswith(b"HTTP/1.1 401")
        holder.close()
        assert answer.status_code == 200 and answer.text == "100000 bytes"
        assert httpx.get(f"{served.url}/metrics", auth=("prometheus", "stays"), timeout=10).status_code == 401
        assert checker.checked == [b"hold", b"hold-2", b"right", b"stays"]
