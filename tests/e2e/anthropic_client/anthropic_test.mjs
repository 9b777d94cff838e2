// The official `@anthropic-ai/sdk` npm client against a running `rapide serve` (stories260K):
// the Messages API with the client's default arguments, whole and streamed, tool use round
// trips, count_tokens, and errors in Anthropic's shape.
// usage: RAPIDE_ROOT_URL=http://127.0.0.1:PORT RAPIDE_API_KEY=k node anthropic_test.mjs
import Anthropic from "@anthropic-ai/sdk";

const root = process.env.RAPIDE_ROOT_URL;
const key = process.env.RAPIDE_API_KEY;
const client = new Anthropic({ baseURL: root, apiKey: key, maxRetries: 0 });
let failures = 0;
function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures++;
}
const textOf = (message) => message.content.filter((b) => b.type === "text")
                                           .map((b) => b.text).join("");

const model = "stories260K";
const messages = [{ role: "user", content: "A story about a dog, please." }];
const system = "You tell stories.";

// messages.create with only the required arguments.
const whole = await client.messages.create({ model, max_tokens: 30, system, messages,
                                             temperature: 0 });
check(whole.type === "message" && whole.role === "assistant" && whole.id.startsWith("msg_") &&
      whole.model === model && whole.content[0]?.type === "text" && textOf(whole).length > 0,
      `messages.create: ${JSON.stringify(textOf(whole).slice(0, 50))}`);
check(["end_turn", "max_tokens"].includes(whole.stop_reason) && whole.stop_sequence === null &&
      whole.usage.input_tokens > 0 && whole.usage.output_tokens > 0 &&
      whole.usage.output_tokens <= 30, `stop_reason ${whole.stop_reason}, usage ` +
      JSON.stringify(whole.usage));

// The same generation as chat completions runs: /v1/messages is a dialect, not a new engine.
const chat = await (await fetch(`${root}/v1/chat/completions`, {
  method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
  body: JSON.stringify({ model, max_tokens: 30, temperature: 0,
                         messages: [{ role: "system", content: system }, ...messages] }),
})).json();
check(chat.choices[0].message.content === textOf(whole) &&
      chat.usage.prompt_tokens === whole.usage.input_tokens,
      "same text and prompt as /v1/chat/completions");

// System as a list of text blocks, user content as blocks: the same prompt.
const blocks = await client.messages.create({
  model, max_tokens: 30, temperature: 0, system: [{ type: "text", text: system }],
  messages: [{ role: "user", content: [{ type: "text", text: messages[0].content }] }] });
check(textOf(blocks) === textOf(whole), "system and content as blocks == as strings");

// messages.stream: the helper assembles the same message from Anthropic's events.
const stream = client.messages.stream({ model, max_tokens: 30, system, messages,
                                        temperature: 0 });
const seen = [];
stream.on("streamEvent", (event) => seen.push(event.type));
let deltas = "";
stream.on("text", (text) => { deltas += text; });
const final = await stream.finalMessage();
check(textOf(final) === textOf(whole) && deltas === textOf(whole),
      "messages.stream text == messages.create text");
check(final.stop_reason === whole.stop_reason &&
      final.usage.output_tokens === whole.usage.output_tokens &&
      final.usage.input_tokens === whole.usage.input_tokens,
      `streamed stop_reason and usage: ${final.stop_reason} ${JSON.stringify(final.usage)}`);
const order = [...new Set(seen)].join(",");
check(seen[0] === "message_start" && seen.at(-1) === "message_stop" &&
      seen.at(-2) === "message_delta" && order ===
      "message_start,content_block_start,content_block_delta,content_block_stop,message_delta," +
      "message_stop", `event order: ${order}`);

// stop_sequences: a word of the greedy text ends the message before it, and the message says
// which sequence matched (stop_reason "stop_sequence"), whole and streamed.
const words = textOf(whole).split(/\s+/).filter((w) => w.length > 2);
const word = words[Math.min(2, words.length - 1)];
const cutAt = textOf(whole).indexOf(word);
const stopped = await client.messages.create({ model, max_tokens: 30, system, messages,
                                               temperature: 0, stop_sequences: ["zzzq", word] });
check(stopped.stop_reason === "stop_sequence" && stopped.stop_sequence === word &&
      textOf(stopped) === textOf(whole).slice(0, cutAt),
      `stop_sequences [${JSON.stringify(word)}]: ${stopped.stop_reason} ` +
      `${JSON.stringify(stopped.stop_sequence)} ${JSON.stringify(textOf(stopped))}`);
const stoppedStream = await client.messages.stream({ model, max_tokens: 30, system, messages,
                                                     temperature: 0, stop_sequences: [word] })
                                           .finalMessage();
check(stoppedStream.stop_reason === "stop_sequence" && stoppedStream.stop_sequence === word &&
      textOf(stoppedStream) === textOf(stopped), "streamed stop_sequence");

// The wire format: "event: TYPE" lines, a ping after message_start (the SDK skips pings).
const wire = await (await fetch(`${root}/v1/messages`, {
  method: "POST", headers: { "Content-Type": "application/json", "x-api-key": key },
  body: JSON.stringify({ model, max_tokens: 3, messages, stream: true }),
})).text();
const names = [...wire.matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
check(names[0] === "message_start" && names[1] === "ping" && names.at(-1) === "message_stop" &&
      wire.split("\n\n").filter((f) => f.trim()).every((f) => /^event: \w+\ndata: \{/.test(f)),
      `SSE frames: ${names.join(",")}`);

// stream: true through create(): the raw events.
const raw = await client.messages.create({ model, max_tokens: 5, messages, stream: true });
let rawText = "";
let stopReason = null;
for await (const event of raw) {
  if (event.type === "content_block_delta" && event.delta.type === "text_delta") {
    rawText += event.delta.text;
  }
  if (event.type === "message_delta") stopReason = event.delta.stop_reason;
}
check(rawText.length > 0 && stopReason === "max_tokens",
      `create({stream: true}) -> ${JSON.stringify(rawText)}, ${stopReason}`);

// Tool use: a forced tool gives a tool_use block whose input follows input_schema; the result
// goes back as a tool_result block and the model answers in text.
const tools = [{ name: "add", description: "Adds two numbers",
                 input_schema: { type: "object", additionalProperties: false,
                                 required: ["a", "b"],
                                 properties: { a: { type: "integer", maximum: 999 },
                                               b: { type: "integer", maximum: 999 } } } }];
const toolParams = { model, max_tokens: 200, messages, tools, temperature: 0,
                     tool_choice: { type: "tool", name: "add", disable_parallel_tool_use: true } };
const toolTurn = await client.messages.create(toolParams);
const use = toolTurn.content.find((b) => b.type === "tool_use");
check(toolTurn.stop_reason === "tool_use" && use && use.name === "add" &&
      use.id.startsWith("toolu_") && Number.isInteger(use.input.a) &&
      Number.isInteger(use.input.b), `tool_use: add(${JSON.stringify(use?.input)})`);
const toolStream = await client.messages.stream(toolParams).finalMessage();
const streamedUse = toolStream.content.find((b) => b.type === "tool_use");
check(toolStream.stop_reason === "tool_use" && streamedUse &&
      JSON.stringify(streamedUse.input) === JSON.stringify(use?.input),
      `streamed tool_use (input_json_delta) == whole: ${JSON.stringify(streamedUse?.input)}`);
const reply = await client.messages.create({
  model, max_tokens: 20, tools, temperature: 0, messages: [
    ...messages,
    { role: "assistant", content: toolTurn.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: use?.id,
                                content: String((use?.input.a ?? 0) + (use?.input.b ?? 0)) }] },
  ] });
check(reply.type === "message" && reply.stop_reason !== "tool_use" && textOf(reply).length > 0,
      `after tool_result: ${JSON.stringify(textOf(reply).slice(0, 40))}`);

// count_tokens: the prompt create() counted.
const counted = await client.messages.countTokens({ model, system, messages });
check(counted.input_tokens === whole.usage.input_tokens,
      `countTokens -> ${counted.input_tokens}`);

// Errors: the SDK's typed errors with Anthropic's body.
async function expectError(promise, status, type, what) {
  try {
    await promise;
    check(false, `${what}: no error`);
  } catch (e) {
    check(e instanceof Anthropic.APIError && e.status === status && e.error?.type === "error" &&
          e.error?.error?.type === type && typeof e.error?.error?.message === "string",
          `${what} -> ${e.status} ${e.error?.error?.type}: ${e.error?.error?.message}`);
  }
}
await expectError(client.messages.create({ model, messages }), 400, "invalid_request_error",
                  "missing max_tokens");
await expectError(client.messages.create({ model, max_tokens: 5,
                                           messages: [{ role: "wizard", content: "x" }] }),
                  400, "invalid_request_error", "unknown role");
await expectError(client.messages.create({ model, max_tokens: 5, messages: [{ role: "user",
                    content: [{ type: "image", source: { type: "base64", media_type: "image/png",
                                                         data: "AAAA" } }] }] }),
                  400, "invalid_request_error", "image block");
await expectError(client.messages.create({ model: "no-such-model", max_tokens: 5, messages }),
                  404, "not_found_error", "unknown model");
const anonymous = new Anthropic({ baseURL: root, apiKey: "wrong", maxRetries: 0 });
await expectError(anonymous.messages.create({ model, max_tokens: 5, messages }), 401,
                  "authentication_error", "wrong API key");

// The key as Anthropic's own header, x-api-key, as older SDKs and many agents send it.
const byHeader = new Anthropic({ baseURL: root, apiKey: null, maxRetries: 0,
                                 defaultHeaders: { "x-api-key": key } });
const viaHeader = await byHeader.messages.create({ model, max_tokens: 30, system, messages,
                                                  temperature: 0 });
check(textOf(viaHeader) === textOf(whole), "x-api-key header accepted");

if (failures) {
  console.log(`${failures} check(s) failed`);
  process.exit(1);
}
console.log("all checks passed");
