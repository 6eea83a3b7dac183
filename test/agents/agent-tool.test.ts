import { asSchema, type JSONSchema7, jsonSchema } from "ai";
import { describe, expect, test } from "vitest";
import { z } from "zod";
import { type AgentTool, declaredTools, defineTool, toolsByName } from "../../src/agents/agent-tool.js";

const object: JSONSchema7 = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
const named = (name: string, extra: Partial<AgentTool> = {}): AgentTool =>
  defineTool({ name, inputSchema: object, execute: () => name, ...extra });

describe("tool names", () => {
  test("letters, digits, _ and - from 1 to 64 characters are taken, in their order", () => {
    const names = ["a", "Z9", "snake_case", "kebab-case", "x".repeat(64)];
    expect([...toolsByName(names.map((n) => named(n))).keys()]).toEqual(names);
    expect(toolsByName([]).size).toBe(0);
  });

  test.each(["", "x".repeat(65), "has space", "dot.name", "ünicode", " lead", "trail ", "two\nlines"])(
    "%j is refused, naming it",
    (name) => {
      expect(() => toolsByName([named("fine"), named(name)])).toThrow(
        new TypeError(`tool name ${JSON.stringify(name)} is not [A-Za-z0-9_-]{1,64}`),
      );
    },
  );

  test("two tools of one name are refused; names differing in case are two tools", () => {
    expect(() => toolsByName([named("ping"), named("pong"), named("ping")])).toThrow(
      new TypeError("two tools are named ping"),
    );
    expect([...toolsByName([named("ping"), named("Ping")]).keys()]).toEqual(["ping", "Ping"]);
  });
});

describe("the tools as declared to the model", () => {
  /** The JSON Schema the SDK sends for a declared tool's input. */
  const sent = async (tool: AgentTool) => {
    const declared = declaredTools(toolsByName([tool]))[tool.name]!;
    return asSchema(declared.inputSchema).jsonSchema;
  };

  test("a description is declared when the tool has one; none is declared otherwise", () => {
    const declared = declaredTools(
      toolsByName([named("described", { description: "Tells the weather" }), named("bare")]),
    );
    expect(Object.keys(declared)).toEqual(["described", "bare"]);
    expect(declared.described!.description).toBe("Tells the weather");
    expect("description" in declared.bare!).toBe(false);
    // the driver runs the calls itself
    expect(declared.described!.execute).toBeUndefined();
  });

  test("a plain JSON Schema is sent as it is", async () => {
    expect(await sent(named("plain"))).toEqual(object);
  });

  test("a schema built with jsonSchema() is declared as it is", async () => {
    const schema = jsonSchema<{ city: string }>(object);
    const declared = declaredTools(toolsByName([named("built", { inputSchema: schema })]));
    expect(declared.built!.inputSchema).toBe(schema);
    expect(await sent(named("built", { inputSchema: schema }))).toEqual(object);
  });

  test("a lazy schema (a function) is declared as it is", async () => {
    const lazy = () => jsonSchema<{ city: string }>(object);
    const declared = declaredTools(toolsByName([named("lazy", { inputSchema: lazy })]));
    expect(declared.lazy!.inputSchema).toBe(lazy);
    expect(await sent(named("lazy", { inputSchema: lazy }))).toEqual(object);
  });

  test("a Standard Schema of another library is declared as it is, and sent as its JSON Schema", async () => {
    // only its "~standard" member marks it: no top-level validate, not a function
    const schema = {
      "~standard": {
        version: 1,
        vendor: "elsewhere",
        validate: (value: unknown) => ({ value }),
        jsonSchema: { input: () => ({ ...object }), output: () => ({ ...object }) },
      },
    } as const;
    const declared = declaredTools(toolsByName([named("standard", { inputSchema: schema as never })]));
    expect(declared.standard!.inputSchema).toBe(schema);
    expect(await sent(named("standard", { inputSchema: schema as never }))).toEqual({
      ...object,
      properties: { city: { type: "string" } },
      additionalProperties: false,
    });
  });

  test("a zod schema is declared as it is, and sent as its JSON Schema", async () => {
    const schema = z.object({ city: z.string() });
    const declared = declaredTools(toolsByName([named("zod", { inputSchema: schema })]));
    expect(declared.zod!.inputSchema).toBe(schema);
    expect(await sent(named("zod", { inputSchema: schema }))).toMatchObject({
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
    });
  });
});
