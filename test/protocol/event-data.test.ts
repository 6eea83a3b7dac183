import { describe, expect, it } from "vitest";
import { EventData, validator } from "../../protocol/index.js";

/**
 * The `data` schemas the package exports for each event type (protocol-v1 §5), for a consumer that
 * checks the events it reads: what the host writes passes, and a value outside a shape does not.
 */
const check = (type: keyof typeof EventData, data: unknown) => validator(EventData[type]).check(data);

const message = {
  messageId: "m",
  source: "user",
  text: "hi",
  attachments: [{ name: "a.txt", type: "text/plain", size: 0 }],
  meta: {},
};

describe("EventData", () => {
  it("turn/start: a turn starts from a prompt, the queue or the server, and from nothing else", () => {
    for (const trigger of ["prompt", "queue", "server"])
      expect(check("turn/start", { turnId: "t", trigger })).toBe(true);
    expect(check("turn/start", { turnId: "t", trigger: "" })).toBe(false);
    expect(check("turn/start", { turnId: "t", trigger: "cron" })).toBe(false);
  });

  it("turn/end and job/ended: the four end states, and no other", () => {
    for (const state of ["completed", "failed", "cancelled", "interrupted"]) {
      expect(check("turn/end", { turnId: "t", state })).toBe(true);
      expect(check("job/ended", { jobId: "j", state })).toBe(true);
    }
    expect(check("turn/end", { turnId: "t", state: "working" })).toBe(false);
  });

  it("user/message: sent by a user or by the server", () => {
    expect(check("user/message", message)).toBe(true);
    expect(check("user/message", { ...message, source: "server" })).toBe(true);
    expect(check("user/message", { ...message, source: "" })).toBe(false);
    expect(check("user/message", { ...message, source: "agent" })).toBe(false);
  });

  it("user/message: each attachment is a shell {name, type, size, attachmentId?, url?, omittedBytes?}", () => {
    const shell = {
      name: "a.txt",
      type: "text/plain",
      size: 3,
      attachmentId: "a",
      url: "u",
      omittedBytes: 0,
    };
    expect(check("user/message", { ...message, attachments: [shell] })).toBe(true);
    for (const wrong of [
      { type: "text/plain", size: 3 },
      { name: "a.txt", size: 3 },
      { name: "a.txt", type: "text/plain" },
      { ...shell, size: -1 },
      { ...shell, size: 1.5 },
      { ...shell, omittedBytes: -1 },
      { ...shell, url: 1 },
    ]) {
      expect(check("user/message", { ...message, attachments: [wrong] })).toBe(false);
    }
  });
});
