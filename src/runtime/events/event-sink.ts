import type { EventType } from "./recorder.js";
import type { EventSubject } from "./reference.js";

/** Where controllers send events; the production EventRecorder fits, tests pass a recorder of their own. */
export interface EventSink {
  event(subject: EventSubject, type: EventType, reason: string, message: string): void;
}
