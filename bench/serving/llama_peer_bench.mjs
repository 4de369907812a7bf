// The serving benchmark's peer: llama.cpp (npm's node-llama-cpp) on the GGUF
// export of the same weights, on the same threads. Prints JSON:
//   {"single_tokens_per_s": decode rate of one sequence after its first token,
//    "concurrent_tokens_per_s": output tokens per second of N sequences at once}
//
//   node bench/serving/llama_peer_bench.mjs MODEL.gguf '[prompt ids]' TOKENS CONCURRENCY THREADS
const where = process.env.NODE_LLAMA_CPP || "node-llama-cpp";
const {getLlama} = await import(where.startsWith("/") ? `${where}/dist/index.js` : where);
const [modelPath, promptJson, tokensArg, concurrencyArg, threadsArg] = process.argv.slice(2);
const prompt = JSON.parse(promptJson);
const tokens = Number(tokensArg), concurrency = Number(concurrencyArg), threads = Number(threadsArg);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});

// Generates `count` tokens after the prompt, past end-of-text as Manta's side
// does; returns [first token time, end time] in ms and the tokens generated.
async function run(sequence, count) {
  let first = 0, n = 0;
  for await (const _ of sequence.evaluate(prompt, {temperature: 0, yieldEogToken: true})) {
    if (n++ === 0) first = performance.now();
    if (n >= count) break;
  }
  return [first, performance.now(), n];
}

const single = await model.createContext({contextSize: 1024, threads});
const rates = [];
for (let i = 0; i < 3; ++i) {
  const seq = single.getSequence();
  const [first, end, n] = await run(seq, tokens);
  rates.push((n - 1) / ((end - first) / 1000));
  seq.dispose();
}
rates.sort((a, b) => a - b);
await single.dispose();

const batch = await model.createContext({contextSize: 1024 * concurrency, sequences: concurrency, threads,
                                         batchSize: 512});
const seqs = Array.from({length: concurrency}, () => batch.getSequence());
const start = performance.now();
const counts = await Promise.all(seqs.map(async (s) => (await run(s, tokens))[2]));
const seconds = (performance.now() - start) / 1000;
const generated = counts.reduce((a, b) => a + b, 0);
console.log(JSON.stringify({single_tokens_per_s: rates[1], concurrent_tokens_per_s: generated / seconds}));
process.exit(0);
