import { z } from "zod";
import { defineTool, OpenAIAgent } from "../../src/ai-sdk.js";

const weather = defineTool({
  name: "weather",
  description: "Current weather of a city",
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }, { signal }) => {
    const res = await fetch(`https://wttr.in/${encodeURIComponent(city)}?format=j1`, { signal });
    if (!res.ok) throw new Error(`weather service answered ${res.status}`); // the model reads this
    return (await res.json()).current_condition[0];
  },
});

const deploy = defineTool({
  name: "deploy",
  description: "Deploys the app to an environment",
  inputSchema: z.object({ target: z.enum(["staging", "prod"]) }),
  // the turn parks until someone answers the approval (console, session.respond, HTTP)
  needsApproval: ({ target }) => target === "prod",
  execute: async ({ target }) => ({ deployed: target, at: new Date().toISOString() }),
});

export const releaseAgent = OpenAIAgent.fromEnv(process.env, {
  tools: [weather, deploy],
  system: "You are the release assistant of a small team.",
  limits: { maxStepsPerTurn: 8, maxToolCallsPerStep: 4 },
});
