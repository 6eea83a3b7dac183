import { expect, it } from "vitest";
import { beforeAppend } from "../../host/host-fixture.js";
import { peersCleanedBy } from "../../support/cleaned-peer.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { gate } from "../../support/gate.js";
import { ALICE_TOKEN, startTestHost } from "../../support/host.js";
import { until } from "../../support/until.js";

const cleanups = cleanupsAfterEach();
const peer = peersCleanedBy(cleanups);

/**
 * A host shutting down (as `serve` does on SIGTERM) keeps each socket open until the calls in
 * flight on it are answered, and answers a call sent meanwhile `host_shutting_down`, then closes
 * it. Before, the socket closed at once: a prompt whose turn was opening was never answered.
 */
it("answers a call in flight before the socket closes, and refuses one sent meanwhile host_shutting_down", async () => {
  const host = await startTestHost();
  cleanups.push(() => host.dispose());
  const onHost = await peer(host, ALICE_TOKEN);
  const { header } = await onHost.call<{ header: { sessionId: string } }>("session.create", {});
  const taken = gate();
  const held = gate();
  beforeAppend(
    host.store,
    (events) => events[0]?.type === "turn/start",
    async () => {
      taken.open();
      await held.promise;
    },
  );
  cleanups.push(() => held.open());
  const promptId = onHost.nextId();
  onHost.send({
    type: "call",
    id: promptId,
    method: "session.prompt",
    params: { sessionId: header.sessionId, clientMessageId: "k", text: "hello" },
  });
  await taken.promise;

  const closing = host.close();
  const listId = onHost.nextId();
  onHost.send({ type: "call", id: listId, method: "session.list", params: {} });
  await until(() => onHost.of(listId).at(0), 10_000, "the list's answer");
  expect(onHost.of(listId)).toEqual([
    expect.objectContaining({
      type: "error",
      error: expect.objectContaining({ code: "host_shutting_down", retryable: true }),
    }),
  ]);
  held.open();
  await closing;
  expect((await onHost.closed).code).toBe(1001);
  // frames that came before the close
  expect(onHost.of(promptId)).toEqual([
    expect.objectContaining({ type: "result", value: expect.objectContaining({ queued: false }) }),
  ]);
});
