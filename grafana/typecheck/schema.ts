// Grafana's own types for a saved dashboard and each panel plugin, from npm's @grafana/schema at
// the Grafana version the dashboards target (package.json). grafana/schema_check.py writes every
// dashboard in grafana/dashboards/ as typed constants next to this file and runs `tsc --noEmit`:
// a key Grafana does not know, a value of the wrong type, an enum value that does not exist or a
// `null` where the key should be absent fails the check.

import type {
  Dashboard,
  FieldConfig,
  MatcherConfig,
  Panel,
  RowPanel,
} from "@grafana/schema";
import type * as bargauge from "@grafana/schema/dist/esm/raw/composable/bargauge/panelcfg/x/BarGaugePanelCfg_types.gen";
import type * as stat from "@grafana/schema/dist/esm/raw/composable/stat/panelcfg/x/StatPanelCfg_types.gen";
import type * as statetimeline from "@grafana/schema/dist/esm/raw/composable/statetimeline/panelcfg/x/StateTimelinePanelCfg_types.gen";
import type * as table from "@grafana/schema/dist/esm/raw/composable/table/panelcfg/x/TablePanelCfg_types.gen";
import type * as text from "@grafana/schema/dist/esm/raw/composable/text/panelcfg/x/TextPanelCfg_types.gen";
import type * as timeseries from "@grafana/schema/dist/esm/raw/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen";
// Grafana 11.3's `xychart` panel saves the v2 model (`mapping`, a field matcher per series); in
// this package those types are `xychart2`, while `xychart` still holds the v1 model.
import type * as xychart from "@grafana/schema/dist/esm/raw/composable/xychart2/panelcfg/x/XYChartPanelCfg_types.gen";

/** No keys at all: the `custom` field config of a plugin that defines none. */
type None = Record<string, never>;

/**
 * How a value of T is saved: every key optional (the generated types make CUE's defaulted keys
 * required, and a saved model may leave them out), string enums as their literal values (JSON has
 * no enums), arrays element by element. Unknown keys are still rejected and `null` is only
 * accepted where T allows it.
 */
export type Saved<T> = T extends string
  ? `${T}`
  : T extends number | boolean | null | undefined
    ? T
    : T extends ReadonlyArray<infer U>
      ? Array<Saved<U>>
      : T extends object
        ? { [K in keyof T]?: Saved<T[K]> }
        : T;

/** Each panel type of the dashboards: [its Options, its FieldConfig (`fieldConfig.defaults.custom`)]. */
interface Plugins {
  bargauge: [bargauge.Options, None];
  stat: [stat.Options, None];
  "state-timeline": [statetimeline.Options, statetimeline.FieldConfig];
  table: [table.Options, table.FieldConfig];
  text: [text.Options, None];
  timeseries: [timeseries.Options, timeseries.FieldConfig];
  xychart: [xychart.Options, xychart.FieldConfig];
}

/** What a field override may set: a standard field option by name, or `custom.<key>` of the plugin. */
type OverrideValues<Custom> = { [K in keyof Omit<FieldConfig, "custom">]-?: Saved<FieldConfig[K]> } & {
  [K in keyof Custom & string as `custom.${K}`]-?: Saved<Custom[K]>;
};
type OverrideProperty<Custom> = {
  [K in keyof OverrideValues<Custom>]: { id: K; value?: OverrideValues<Custom>[K] };
}[keyof OverrideValues<Custom>];

/** A panel of one plugin type: the common panel keys, that plugin's options and field config. */
export type SavedPanel<Type extends keyof Plugins> = Saved<Omit<Panel, "type" | "options" | "fieldConfig">> & {
  type: Type;
  options?: Saved<Plugins[Type][0]>;
  fieldConfig?: {
    defaults?: Saved<Omit<FieldConfig, "custom">> & { custom?: Saved<Plugins[Type][1]> };
    overrides?: Array<{ matcher: Saved<MatcherConfig>; properties: Array<OverrideProperty<Plugins[Type][1]>> }>;
  };
};

export type SavedRow = Saved<RowPanel>;

/** The dashboard without its panels (each panel is checked on its own, against its plugin). */
export type SavedDashboard = Saved<Omit<Dashboard, "panels">> & { panels?: never };
