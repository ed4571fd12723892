/**
 * Upstream's resource.Quantity as an oracle: test/control-plane/quantity (Go, apimachinery at the
 * pinned release) built once into the cache, keyed by the hash of its source and of the module's
 * go.mod/go.sum (read-only: the control-plane build stamp hashes them), then asked over stdin/stdout.
 */
import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const moduleDir = fileURLToPath(new URL("../control-plane", import.meta.url));

/** What the Go program answers for one batch of strings. */
export interface OracleAnswer {
  ok: boolean[];
  string: string[];
  /** cmp[i][j] is Cmp(i, j), null when either was refused. */
  cmp: (number | null)[][];
}

function buildOracle(): string {
  const hash = createHash("sha256");
  for (const file of ["quantity/main.go", "go.mod", "go.sum"])
    hash.update(readFileSync(join(moduleDir, file)));
  const cacheRoot =
    process.env.KVC_CACHE_DIR ??
    join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "kube-volume-controller");
  const dir = join(cacheRoot, "quantity-oracle", hash.digest("hex").slice(0, 16));
  const binary = join(dir, "quantity");
  if (existsSync(binary)) return binary;
  mkdirSync(dir, { recursive: true });
  const partial = `${binary}.${process.pid}`;
  execFileSync("go", ["build", "-mod=readonly", "-o", partial, "./quantity"], {
    cwd: moduleDir,
    stdio: ["ignore", "inherit", "inherit"],
    env: { ...process.env, CGO_ENABLED: "0" },
  });
  renameSync(partial, binary); // atomic: a concurrent run sees the whole binary or none
  return binary;
}

export interface QuantityOracle {
  ask(texts: readonly string[]): Promise<OracleAnswer>;
  close(): Promise<void>;
}

export function startQuantityOracle(): QuantityOracle {
  const child = spawn(buildOracle(), [], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const exited = new Promise<void>((resolve) =>
    child.once("exit", () => {
      resolve();
    }),
  );
  return {
    async ask(texts) {
      child.stdin.write(`${JSON.stringify(texts)}\n`);
      const line = await lines.next();
      if (line.done) throw new Error(`quantity oracle exited (code ${child.exitCode ?? "?"})`);
      return JSON.parse(line.value) as OracleAnswer;
    },
    async close() {
      child.stdin.end();
      await exited;
    },
  };
}
