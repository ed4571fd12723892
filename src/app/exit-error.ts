/**
 * Ends `kvc run` with an exit code the CLI exits with: library code never calls process.exit.
 */
export class ExitError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = "ExitError";
  }
}
