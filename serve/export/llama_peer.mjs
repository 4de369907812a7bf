// llama.cpp (through npm's node-llama-cpp) on a GGUF file: greedy tokens
// after a prompt of token ids, for comparing an export with Manta's engine.
//
//   node serve/export/llama_peer.mjs MODEL.gguf '[84, 104, 101]' 20  ->  [46, 10, ...]
//
// NODE_LLAMA_CPP names the package's folder when it is not installed here.
const where = process.env.NODE_LLAMA_CPP || "node-llama-cpp";
const {getLlama} = await import(where.startsWith("/") ? `${where}/dist/index.js` : where);
const [modelPath, promptJson, count] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: 512, threads: 1});
const sequence = context.getSequence();
const out = [];
for await (const token of sequence.evaluate(JSON.parse(promptJson), {temperature: 0})) {
  out.push(token);
  if (out.length >= Number(count)) break;
}
console.log(JSON.stringify(out));
process.exit(0);
