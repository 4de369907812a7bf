// llama.cpp (through npm's node-llama-cpp) on GGUF files: greedy tokens
// after a prompt of token ids, for comparing an export with Manta's engine.
// One line for each file, in order.
//
//   node serve/export/llama_peer.mjs MODEL.gguf '[84, 104, 101]' 20 [MORE.gguf ...]  ->  [46, 10, ...]
//
// NODE_LLAMA_CPP names the package's folder when it is not installed here.
const where = process.env.NODE_LLAMA_CPP || "node-llama-cpp";
const {getLlama} = await import(where.startsWith("/") ? `${where}/dist/index.js` : where);
const [modelPath, promptJson, count, ...more] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
for (const path of [modelPath, ...more]) {
  const model = await llama.loadModel({modelPath: path});
  const context = await model.createContext({contextSize: 512, threads: 1});
  const sequence = context.getSequence();
  const out = [];
  for await (const token of sequence.evaluate(JSON.parse(promptJson), {temperature: 0})) {
    out.push(token);
    if (out.length >= Number(count)) break;
  }
  console.log(JSON.stringify(out));
  await context.dispose();
  await model.dispose();
}
process.exit(0);
