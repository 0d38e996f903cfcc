// Runs pi 1.6's own edit tool on every case of testdata/edit/ and compares
// what it does with what the case says (which TestEditCases holds rpi to):
// the tool's text, and the file's bytes afterwards. With --update it writes
// pi's results into the cases instead (the "want" sections but "want
// dialog", which is rpi's own). Not part of CI; scripts/pi-edit-compare.sh
// runs it.
//   node scripts/pi-edit-compare.mjs PI16_DIR PI_AI_DIR CASES_DIR [--update | --random N OUT]
//
// A case (.txtar): a sentence, then sections "-- NAME --": args.json (the
// edit call's arguments), "file F" (the file before; each line a JSON
// string, the file their concatenation), "want F" (after), and "want
// result" or "want error" (the tool's text); after a result, the result's
// details: "want diff" (details.diff and an LF), "want patch"
// (details.patch) and "want firstChangedLine". A case with a section "rpi
// only" (saying why) shows a limit of rpi's own: it is not run in pi.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [pi16, piAI, casesDir, flag] = process.argv.slice(2);
const update = flag === "--update";
const { createEditToolDefinition } = await import(path.join(pi16, "dist/core/tools/edit.js"));
const { validateToolArguments } = await import(path.join(piAI, "dist/utils/validation.js"));

function parse(text) {
  const c = { comment: "", sections: new Map() };
  let name = null, lines = [];
  const flush = () => { if (name === null) c.comment = lines.join(""); else c.sections.set(name, lines.join("")); lines = []; };
  for (const line of text.split(/(?<=\n)/)) {
    const m = /^-- (.*) --\n?$/.exec(line);
    if (m) { flush(); name = m[1]; } else lines.push(line);
  }
  flush();
  return c;
}
const format = (c) => c.comment + [...c.sections].map(([n, s]) => `-- ${n} --\n${s}`).join("");
const decodeFile = (s) => s.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l)).join("");
// One JSON string per line of the file, each with its own line end; what
// cannot be seen (a BOM, combining marks, special spaces) as \uXXXX.
const unseen = /[\u0080-\u00a0\u00ad\p{M}\p{Cf}\p{Z}]/gu;
const escapeUnseen = (s) => s.replace(unseen, (c) => (c === " " ? c : "\\u" + c.codePointAt(0).toString(16).padStart(4, "0")));
const encodeFile = (s) => (s.match(/[^\n]*\n|[^\n]+/g) ?? []).map((l) => escapeUnseen(JSON.stringify(l)) + "\n").join("");

// runPi runs pi 1.6's edit tool as its agent loop does (prepareArguments,
// validation, execute) on one file; it answers the tool's text, whether it
// failed, the file afterwards and the result's details.
async function runPi(fileName, before, args) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pi-edit-"));
  let text, isError = false, details;
  try {
    fs.writeFileSync(path.join(dir, fileName), before);
    const def = createEditToolDefinition(dir);
    const prepared = def.prepareArguments(args);
    const valid = validateToolArguments({ name: "edit", parameters: def.parameters }, { name: "edit", arguments: prepared });
    const res = await def.execute("case", valid, undefined, undefined, { cwd: dir });
    text = res.content.map((b) => b.text).join("");
    details = res.details;
  } catch (e) {
    text = e.message;
    isError = true;
  }
  const after = fs.readFileSync(path.join(dir, fileName), "utf8");
  fs.rmSync(dir, { recursive: true });
  return { text, isError, after, details };
}

// With --random N OUT: N random edit calls on random files, and what pi 1.6
// made of each, as JSON lines for TestEditAgainstPi. The files mix line
// ends, trailing whitespace, curly quotes, dashes, special spaces and
// characters NFKC changes; the edits take pieces of the file, often changed
// the way a model changes them (plain quotes, no trailing spaces, NFKC).
if (flag === "--random") {
  let seed = 2024;
  const rnd = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return (seed >>> 8) % n; };
  const pick = (a) => a[rnd(a.length)];
  const words = ["alpha", "beta", "x = 1", "return x;", "“quoted”", "it’s", "a — b", "−1", "ﬁle", "Ｆull", "café", "cafe\u0301",
    "\u00a0nbsp", "x²", "…", "\t", "  ", "ｶﾞ", "\u1100\u1161", "Å", "{", "}", "'single'", "\"double\"", "-", "1", "2"];
  const ends = ["\n", "\n", "\n", "\r\n", "\r\n", "\r", "  \n", " \r\n", "\t\n"];
  const loosen = (s) => s.replace(/[“”]/g, '"').replace(/[‘’]/g, "'").replace(/[—−]/g, "-").replace(/[ \t]+(?=\n|$)/g, "");
  const vary = (s) => [s, loosen(s), s.normalize("NFKC"), s.normalize("NFD"), s.replace(/\r\n/g, "\n")][rnd(5)];
  const n = Number(process.argv[6]), out = process.argv[7];
  const rows = [];
  // A long file of few distinct lines (jsdiff aligns repeated lines its
  // own way), edits that replace runs of lines with more or fewer, near
  // its start, its end and each other.
  const longCall = () => {
    const pool = ["}", "", "  return x;", "x++", "{", "a", "b", "// note", "  if (y) {"];
    const lines = [];
    for (let l = 1 + rnd(rnd(4) === 0 ? 3000 : 300); l > 0; l--) lines.push(pick(pool) + (rnd(4) === 0 ? ` ${rnd(50)}` : ""));
    const end = pick(["\n", "\n", "\r\n", "\r"]);
    let file = (rnd(6) === 0 ? "\ufeff" : "") + lines.join(end) + (rnd(3) ? end : "");
    const body = file.replace(/^\ufeff/, "").replace(/\r\n?/g, "\n");
    const edits = [];
    for (let e = 1 + rnd(4); e > 0; e--) {
      const at = pick([0, rnd(body.length), rnd(body.length), Math.max(body.length - 1 - rnd(40), 0)]);
      const oldText = body.slice(at, at + 1 + rnd(pick([10, 80, 400])));
      const added = [];
      for (let k = rnd(pick([2, 10, 120])); k > 0; k--) added.push(pick(pool));
      edits.push({ oldText, newText: added.join("\n") + (rnd(2) ? "\n" : "") });
    }
    return { file, args: { path: "f.txt", edits } };
  };
  for (let i = 0; i < n; i++) {
    if (rnd(3) === 0) {
      const { file, args } = longCall();
      rows.push(JSON.stringify({ file, args, ...(await runPi("f.txt", file, structuredClone(args))) }));
      continue;
    }
    let file = rnd(8) === 0 ? "\ufeff" : "";
    for (let l = 1 + rnd(8); l > 0; l--) {
      let line = "";
      for (let w = 1 + rnd(4); w > 0; w--) line += (line ? " " : "") + pick(words);
      file += line + (l > 1 || rnd(3) ? pick(ends) : "");
    }
    const body = file.replace(/^\ufeff/, "");
    const edits = [];
    for (let e = 1 + rnd(3); e > 0; e--) {
      const at = rnd(Math.max(body.length, 1)), len = 1 + rnd(12);
      let oldText = vary(body.slice(at, at + len));
      if (rnd(10) === 0) oldText = pick(words);
      edits.push({ oldText, newText: rnd(4) === 0 ? "" : pick(words) + (rnd(2) ? "\n" + pick(words) : "") });
    }
    const shape = rnd(6);
    const args = shape === 0 ? { path: "f.txt", edits: JSON.stringify(edits) }
      : shape === 1 && edits.length === 1 ? { path: "f.txt", edits: edits[0] }
      : shape === 2 && edits.length === 1 ? { path: "f.txt", ...edits[0] }
      : shape === 3 ? { path: "f.txt", edits: edits.slice(1), ...edits[0] }
      : { path: "f.txt", edits };
    rows.push(JSON.stringify({ file, args, ...(await runPi("f.txt", file, structuredClone(args))) }));
  }
  fs.writeFileSync(out, rows.join("\n") + "\n");
  console.log(`${n} random edit calls run through pi 1.6`);
  process.exit(0);
}

let failed = 0, count = 0;
for (const name of fs.readdirSync(casesDir).filter((n) => n.endsWith(".txtar")).sort()) {
  const file = path.join(casesDir, name);
  const c = parse(fs.readFileSync(file, "utf8"));
  if (c.sections.has("rpi only")) { // a limit of rpi's own, which pi does not have
    console.log(`SKIP ${name}: rpi only (${c.sections.get("rpi only").trim()})`);
    continue;
  }
  const [fileName] = [...c.sections.keys()].filter((k) => k.startsWith("file ")).map((k) => k.slice(5));
  const before = decodeFile(c.sections.get("file " + fileName));
  const { text, isError, after, details } = await runPi(fileName, before, JSON.parse(c.sections.get("args.json")));
  const got = new Map([[`want ${fileName}`, encodeFile(after)], [isError ? "want error" : "want result", text + "\n"]]);
  if (!isError) {
    got.set("want diff", details.diff + "\n");
    got.set("want patch", details.patch);
    got.set("want firstChangedLine", `${details.firstChangedLine}\n`);
  }
  count++;
  if (update) {
    const sections = new Map([...c.sections].filter(([n]) => !n.startsWith("want ") || n === "want dialog"));
    for (const [n, s] of got) sections.set(n, s);
    if (sections.has("want dialog")) { const d = sections.get("want dialog"); sections.delete("want dialog"); sections.set("want dialog", d); }
    c.sections = sections;
    fs.writeFileSync(file, format(c));
    continue;
  }
  const wants = [...c.sections.keys()].filter((n) => n.startsWith("want ") && n !== "want dialog");
  const same = wants.length === got.size && [...got].every(([n, s]) => c.sections.get(n) === s);
  if (!same) {
    failed++;
    console.log(`FAIL ${name}: pi 1.6 gives\n${[...got].map(([n, s]) => `-- ${n} --\n${s}`).join("")}`);
  } else console.log(`PASS ${name}`);
}
console.log(`${count} cases, ${failed} differ from pi 1.6${update ? " (updated)" : ""}`);
process.exit(failed ? 1 : 0);
