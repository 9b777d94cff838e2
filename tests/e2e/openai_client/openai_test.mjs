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
const anonymous = new OpenAI({ baseURL: process.env.RAPIDE_BASE_URL, apiKey: "wrong",
                               maxRetries: 0 });
await expectError(anonymous.models.list(), 401, undefined, "wrong API key");

if (failures) {
  console.log(`${failures} check(s) failed`);
  process.exit(1);
}
console.log("all checks passed");
