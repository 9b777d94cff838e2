// The official `openai` npm client against a running `rapide serve` (stories260K).
// usage: RAPIDE_BASE_URL=http://127.0.0.1:PORT/v1 RAPIDE_API_KEY=k node openai_test.mjs
import OpenAI from "openai";

const client = new OpenAI({
  baseURL: process.env.RAPIDE_BASE_URL,
  apiKey: process.env.RAPIDE_API_KEY,
  maxRetries: 0,
});
let failures = 0;
function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures++;
}

const models = await client.models.list();
const model = models.data[0].id;
check(model === "stories260K", `models.list -> ${model}`);
const retrieved = await client.models.retrieve(model);
check(retrieved.id === model && retrieved.object === "model", `models.retrieve -> ${retrieved.id}`);

// Embeddings with the client's defaults: it asks for encoding_format "base64" and decodes the
// little-endian float32 bytes itself; the numbers must be the ones "float" sends.
const texts = ["Once upon a time", "The dog ran home."];
const packed = await client.embeddings.create({ model, input: texts });
const plain = await client.embeddings.create({ model, input: texts, encoding_format: "float" });
const vector = packed.data[0].embedding;
check(packed.data.length === 2 && vector.length > 0 &&
      vector.length === plain.data[0].embedding.length && packed.usage.prompt_tokens > 0,
      `embeddings.create (default base64): ${packed.data.length} x ${vector.length}`);
check(packed.data.every((d, i) => d.embedding.every((x, j) => x === plain.data[i].embedding[j])),
      "base64 embeddings == float embeddings");
const norm = Math.sqrt(vector.reduce((s, x) => s + x * x, 0));
check(Math.abs(norm - 1) < 1e-5, `embedding is L2-normalised (${norm})`);
const same = await client.embeddings.create({ model, input: texts[0],
                                              dimensions: vector.length });
check(same.data[0].embedding.every((x, j) => x === vector[j]),
      "dimensions = the model's width is accepted");

// Completions, non-streamed and streamed with the same seed.
const params = { model, prompt: "Once upon a time", max_tokens: 40, temperature: 0.8, seed: 99 };
const whole = await client.completions.create(params);
check(whole.choices[0].text.length > 0 && whole.usage.completion_tokens > 0,
      `completion: ${JSON.stringify(whole.choices[0].text.slice(0, 50))}`);
let streamed = "";
let usage = null;
const stream = await client.completions.create({ ...params, stream: true,
                                                 stream_options: { include_usage: true } });
for await (const chunk of stream) {
  if (chunk.choices.length) streamed += chunk.choices[0].text;
  if (chunk.usage) usage = chunk.usage;
}
check(streamed === whole.choices[0].text, "streamed completion == non-streamed");
check(usage && usage.completion_tokens === whole.usage.completion_tokens, "stream usage");

const greedy = await client.completions.create({ model, prompt: "Once upon a time",
                                                 max_tokens: 12, temperature: 0 });
check(greedy.choices[0].text.startsWith(", there was a little girl"),
      `greedy completion: ${JSON.stringify(greedy.choices[0].text)}`);

// Chat.
const messages = [{ role: "system", content: "You tell stories." },
                  { role: "user", content: "A story about a dog, please." }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 30,
                                                    temperature: 0.7, seed: 3 });
check(chat.choices[0].message.role === "assistant" && chat.usage.total_tokens > 0,
      `chat: ${JSON.stringify(chat.choices[0].message.content.slice(0, 50))}`);
let chatStreamed = "";
const chatStream = await client.chat.completions.create({ model, messages, max_tokens: 30,
                                                          temperature: 0.7, seed: 3, stream: true });
for await (const chunk of chatStream) chatStreamed += chunk.choices[0]?.delta?.content ?? "";
check(chatStreamed === chat.choices[0].message.content, "streamed chat == non-streamed");

const two = await client.chat.completions.create({ model, messages, max_tokens: 5, n: 2,
                                                   logprobs: true, top_logprobs: 2 });
check(two.choices.length === 2 && two.choices[0].logprobs.content.length > 0,
      "chat n=2 with logprobs");

// Structured output through the client's helpers: parse() fills message.parsed from a strict
// json_schema response_format.
const schema = { type: "object", additionalProperties: false, required: ["name", "age"],
                 properties: { name: { type: "string", maxLength: 10 },
                               age: { type: "integer", minimum: 0, maximum: 99 } } };
const parsed = await client.chat.completions.parse({
  model, messages, max_tokens: 200, temperature: 1, seed: 5,
  response_format: { type: "json_schema", json_schema: { name: "person", schema, strict: true } },
});
const person = parsed.choices[0].message.parsed;
check(person && typeof person.name === "string" && person.name.length <= 10 &&
      Number.isInteger(person.age) && person.age >= 0 && person.age <= 99 &&
      Object.keys(person).length === 2, `parse() json_schema: ${JSON.stringify(person)}`);

// Tool calling: runTools() with a named tool_choice calls the function once with arguments
// the client parsed from tool_calls; the streaming helper assembles the same call from deltas.
const addTool = { name: "add", description: "Adds two numbers",
                  parameters: { type: "object", additionalProperties: false, required: ["a", "b"],
                                properties: { a: { type: "integer", maximum: 999 },
                                              b: { type: "integer", maximum: 999 } } } };
let called = null;
const runner = client.chat.completions.runTools({
  model, messages, max_tokens: 300, temperature: 1, seed: 9, parallel_tool_calls: false,
  tool_choice: { type: "function", function: { name: "add" } },
  tools: [{ type: "function", function: { ...addTool, parse: JSON.parse,
                                          function: (args) => { called = args; return args.a + args.b; } } }],
});
await runner.done();
check(called && Number.isInteger(called.a) && Number.isInteger(called.b),
      `runTools() called add(${JSON.stringify(called)})`);
const toolParams = { model, messages, max_tokens: 200, temperature: 1, seed: 9,
                     tool_choice: "required", parallel_tool_calls: false,
                     tools: [{ type: "function", function: addTool }] };
const toolWhole = await client.chat.completions.create(toolParams);
const toolStream = client.chat.completions.stream(toolParams);
const toolFinal = await toolStream.finalChatCompletion();
const wholeCall = toolWhole.choices[0].message.tool_calls?.[0]?.function;
const streamCall = toolFinal.choices[0].message.tool_calls?.[0]?.function;
check(toolWhole.choices[0].finish_reason === "tool_calls" && wholeCall &&
      streamCall && wholeCall.name === streamCall.name &&
      wholeCall.arguments === streamCall.arguments,
      `tool_calls streamed == non-streamed: ${JSON.stringify(streamCall)}`);

// Errors surface as the client's typed errors with OpenAI's fields.
async function expectError(promise, status, param, what) {
  try {
    await promise;
    check(false, `${what}: no error`);
  } catch (e) {
    check(e instanceof OpenAI.APIError && e.status === status && (param === undefined ||
          e.param === param), `${what} -> ${e.status} ${e.param ?? ""} ${e.message}`);
  }
}
await expectError(client.completions.create({ model, prompt: "x", top_p: 7 }), 400, "top_p",
                  "invalid top_p");
await expectError(client.completions.create({ model: "no-such-model", prompt: "x" }), 404,
                  "model", "unknown model");
await expectError(client.chat.completions.create({ model, messages: [] }), 400, "messages",
                  "empty messages");
await expectError(client.chat.completions.create({
  model, messages, response_format: { type: "json_schema",
                                      json_schema: { name: "x", schema: { allOf: [] } } } }),
                  400, "response_format", "unsupported JSON Schema keyword");
await expectError(client.embeddings.create({ model, input: "x", dimensions: 8 }), 400,
                  "dimensions", "dimensions the model cannot shorten to");
const anonymous = new OpenAI({ baseURL: process.env.RAPIDE_BASE_URL, apiKey: "wrong",
                               maxRetries: 0 });
await expectError(anonymous.models.list(), 401, undefined, "wrong API key");

if (failures) {
  console.log(`${failures} check(s) failed`);
  process.exit(1);
}
console.log("all checks passed");
