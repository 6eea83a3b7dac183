import type { HandlerTable } from "../host-context.js";
import { dismiss, restore } from "./dismissal-handlers.js";
import { clear, create, fork, remove } from "./lifecycle-handlers.js";
import { cancel, respond, updateQueue } from "./live-handlers.js";
import { prompt } from "./prompt-handler.js";
import { attachment, list, models, page, search } from "./read-handlers.js";
import { ack, rename, selectModel } from "./write-handlers.js";

/** One handler per §4 call; the compiler checks every call method has one. */
export const HANDLERS: HandlerTable = {
  "session.list": list,
  "session.page": page,
  "session.search": search,
  "session.models": models,
  "session.attachment": attachment,
  "session.create": create,
  "session.fork": fork,
  "session.prompt": prompt,
  "session.rename": rename,
  "session.selectModel": selectModel,
  "session.cancel": cancel,
  "session.updateQueue": updateQueue,
  "session.respond": respond,
  "session.ack": ack,
  "session.clear": clear,
  "session.dismiss": dismiss,
  "session.restore": restore,
  "session.delete": remove,
};
