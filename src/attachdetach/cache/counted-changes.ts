/**
 * What the desired and actual states of the world share for the reconciler, which sleeps while
 * neither changes (issue 30 goal 2): a count of their changes and listeners told of each.
 */
export abstract class CountedChanges {
  #generation = 0;
  readonly #listeners: (() => void)[] = [];

  /** Counts the changes: unchanged, the reconciler's next pass would find what its last one found. */
  get generation(): number {
    return this.#generation;
  }

  /** Calls `listener` after every change (the reconciler, asleep while idle). */
  onChange(listener: () => void): void {
    this.#listeners.push(listener);
  }

  protected changed(): void {
    this.#generation++;
    for (const listener of this.#listeners) listener();
  }
}
