import assert from "node:assert/strict";
import { test } from "node:test";
import { exposedSeries } from "../support/exposition.js";
import { metricNames } from "../support/promql.js";

test("metricNames finds the selected metrics, not functions, labels, strings, durations or variables", () => {
  const cases: [string, string[]][] = [
    ["up", ["up"]],
    ['absent(leader_election_master_status{job="kvc"} == 1)', ["leader_election_master_status"]],
    [
      'histogram_quantile(0.99, sum by (name, le) (rate(workqueue_queue_duration_seconds_bucket{job="$job", name=~"a|b"}[$__rate_interval]))) > 5',
      ["workqueue_queue_duration_seconds_bucket"],
    ],
    ["sum(rate(x_total[5m])) without (instance) / on(job) group_left(node) y offset 1h", ["x_total", "y"]],
    ['deriv(sum(bound_count{job=~"${job}"})[5m:1m]) * -1e3 > bool inf', ["bound_count"]],
    ['time() - min(kvc_ts{a="}{[]sum("}) or vector(0) unless z', ["kvc_ts", "z"]],
    ["a and b or c unless d", ["a", "b", "c", "d"]],
    ["sum(a) by (le) + count by (x) (b)", ["a", "b"]],
  ];
  for (const [expr, names] of cases) assert.deepEqual(metricNames(expr), names, expr);
  assert.throws(() => metricNames('{__name__="up"}'), /__name__/);
});

test("exposedSeries offers a histogram's series but not its bare name, and families with no sample", () => {
  const body = [
    "# HELP h a histogram",
    "# TYPE h histogram",
    'h_bucket{le="1"} 0',
    "# TYPE c_total counter",
    "# TYPE s summary",
    "# TYPE g gauge",
    "g 1",
    'untyped_one{a="b"} 2',
  ].join("\n");
  assert.deepEqual([...exposedSeries(body)].sort(), [
    ["c_total", "counter"],
    ["g", "gauge"],
    ["h_bucket", "histogram"],
    ["h_count", "histogram"],
    ["h_sum", "histogram"],
    ["s", "summary"],
    ["s_count", "summary"],
    ["s_sum", "summary"],
    ["untyped_one", "untyped"],
  ]);
});
