import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { FakeClock } from "../../src/runtime/clock.js";
import { ExponentialBackoffManager } from "../../src/runtime/informer/index.js";

describe("informer backoff", () => {
  test("doubles from 800 ms to a 30 s cap and keeps going", () => {
    const backoff = new ExponentialBackoffManager({ clock: new FakeClock(), random: () => 0 });
    const delays = Array.from({ length: 100 }, () => backoff.next());
    assert.deepEqual(delays.slice(0, 8), [800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000]);
    assert.ok(delays.every((d, n) => d === Math.min(800 * 2 ** n, 30_000)));
    assert.equal(delays.at(-1), 30_000, "no step limit: the hundredth retry still gets a delay");
  });

  test("adds up to 100% jitter on top of the base delay", () => {
    const randoms = [0.25, 0.999, 0.5, 0, 0.75, 0.1, 0.9, 0.3];
    let i = 0;
    const backoff = new ExponentialBackoffManager({
      clock: new FakeClock(),
      random: () => randoms[i++ % randoms.length]!,
    });
    const bases = [800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000];
    for (const [n, base] of bases.entries()) {
      assert.equal(backoff.next(), base * (1 + randoms[n]!));
    }

    const real = new ExponentialBackoffManager({ clock: new FakeClock() });
    const spread = new Set<number>();
    for (let n = 0; n < 50; n++) {
      const d = real.next();
      const base = Math.min(800 * 2 ** n, 30_000);
      assert.ok(d >= base && d < 2 * base, `delay ${d} within [${base}, ${2 * base})`);
      spread.add(d);
    }
    assert.ok(spread.size > 40, "jitter spreads delays");
  });

  test("starts again from 800 ms after two quiet minutes, not while failures keep coming", () => {
    const clock = new FakeClock();
    const backoff = new ExponentialBackoffManager({ clock, random: () => 0 });
    for (let n = 0; n < 8; n++) {
      backoff.next();
      clock.advance(60_000); // failing again every minute: no reset
    }
    assert.equal(backoff.next(), 30_000);
    clock.advance(120_001);
    assert.equal(backoff.next(), 800);
    assert.equal(backoff.next(), 1600);
  });
});
