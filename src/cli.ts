#!/usr/bin/env node
import yargs from "yargs";
import { hideBin } from "yargs/helpers";
import { runDev } from "./dev.js";

await yargs(hideBin(process.argv))
  .scriptName("kvc")
  .command(
    "dev",
    "Build (cached) and start an embedded etcd + kube-apiserver on loopback, print how to reach it, run until interrupted",
    (y) => y,
    () => runDev(),
  )
  .demandCommand(1, "name a command, e.g. `kvc dev`")
  .strict()
  .help()
  .parseAsync();
