import { isNotFound } from "../../src/runtime/api-errors.js";
import { waitFor } from "../../src/util/wait.js";

/** Resolves when `read` answers 404: deletes are asynchronous when finalizers are involved. */
export async function waitGone(
  what: string,
  read: () => Promise<unknown>,
  timeoutMs = 60_000,
): Promise<void> {
  await waitFor(
    async () => {
      try {
        await read();
        return false;
      } catch (err) {
        if (isNotFound(err)) return true;
        throw err;
      }
    },
    { timeoutMs, what: `${what} to be deleted` },
  );
}
