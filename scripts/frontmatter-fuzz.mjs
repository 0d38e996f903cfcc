// frontmatter-fuzz.mjs writes random front matter, read by pi's own
// parseFrontmatter, for TestFrontMatterAgainstPi to compare rpi with:
//
//	node scripts/frontmatter-fuzz.mjs PI_DIST COUNT SEED > cases.json
//	RPI_FRONTMATTER_CASES=cases.json go test -run TestFrontMatterAgainstPi .
//
// PI_DIST is pi-coding-agent's dist folder (with utils/frontmatter.js).
// Each case is {input, error} or {input, name, description, hidden, body}:
// a field that is not a string is null, hidden is disable-model-invocation === true.
process.removeAllListeners("warning");
process.on("warning", () => {});
const [dist, count = "2000", seed = "1"] = process.argv.slice(2);
const { parseFrontmatter } = await import(dist + "/utils/frontmatter.js");

let state = Number(seed) >>> 0;
const rand = (n) => { // mulberry32
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) % n;
};
const pick = (a) => a[rand(a.length)];

const words = ["a", "b c", "Deploy it", "true", "True", "false", "null", "~", "123", "1.5", "-1", "+2", "0x1F", "0o7", ".inf", "1e3", "1_000",
  "yes", "it's", "x:y", "a: b", "a:", "c #d", "c#d", "- x", "-x", "?x", "? x", ":x", "é", "\u00e9t\u00e9", "tab\there", "", " ", "[a]", "{a}", "@x",
  "`x`", "&a", "*a", "!x", "%x", "|", ">", "#", ",x", "a, b", "\"q\"", "'q'", "\\n", "http://x.y/z", "a\"b", "a'b"];
const keys = ["name", "description", "disable-model-invocation", "license", "metadata", "allowed-tools", "version", "\"description\"", "'name'", "desc ription", "Name"];
const indents = ["", " ", "  ", "   ", "    ", "\t", "  \t"];

function dq() { return '"' + Array.from({ length: rand(4) }, () => pick(["a", " ", "\\n", "\\\"", "\\u00e9", "\\x41", "\\t", "\\\\", "\\q", "\\ud800", "'", "#", ": ", "\n", "\n  ", "\n\n  ", "\\\n  ", "b  \n  c"])).join("") + pick(['"', '"', '"', '" #c', '"x', ""]); }
function sq() { return "'" + Array.from({ length: rand(4) }, () => pick(["a", " ", "''", "\\n", '"', "#", "\n  ", "\n\n  ", "x  \n  y"])).join("") + pick(["'", "'", "' # c", "'x", ""]); }
function block() {
  const head = pick(["|", ">", "|-", ">-", "|+", ">+", "|2", ">1", "|-2", "|2-", "| # c", "|x", ">+1"]);
  const lines = Array.from({ length: rand(5) }, () => pick(["", " ", "  ", "   ", "    "]) + pick(["", "text", "more text", "# not a comment", "- item", "k: v", "\tt"]));
  return head + "\n" + lines.join("\n");
}
function plain() {
  let s = pick(words);
  for (let n = rand(3); n > 0; n--) s += pick(["\n  ", "\n", "\n\n  ", "\n ", "\n  # c\n  "]) + pick(words);
  return s + pick(["", "", " # comment", "  ", "#x"]);
}
function flow(d = 0) {
  if (d > 2 || rand(3) === 0) return pick(["a", "'b'", '"c"', "1", "", "d e", "x: y", "[]", "{}"]);
  const items = Array.from({ length: rand(4) }, () => (rand(2) ? flow(d + 1) : pick(["k", "'k'"]) + ": " + flow(d + 1)));
  const [o, c] = rand(2) ? ["[", "]"] : ["{", "}"];
  return o + items.join(pick([", ", ",", ",\n  ", " , "])) + pick(["", ",", "\n  "]) + c;
}
function nested(d = 0) {
  const ind = "  ".repeat(d + 1);
  const lines = [];
  for (let n = rand(4) + 1; n > 0; n--) {
    if (rand(2)) lines.push(ind + pick(["- ", "-  "]) + pick(["x", "'y'", "k: v", "- z", "[a]", ""]));
    else lines.push(ind + pick(["k", "j", "l"]) + ":" + pick([" v", " 'v'", "", " [a, b]", " |\n" + ind + "  t"]));
    if (d < 2 && rand(4) === 0) lines.push(nested(d + 1));
  }
  return pick(["", "", "\n" + ind + "# c"]) + (rand(6) === 0 ? lines.join("\n").replace(/^  /, "") : lines.join("\n"));
}
function value() {
  switch (rand(7)) {
    case 0: return " " + dq();
    case 1: return " " + sq();
    case 2: return " " + block();
    case 3: return " " + flow();
    case 4: return "\n" + nested();
    default: return pick([" ", "  ", "\t", ""]) + plain();
  }
}
function doc() {
  const lines = [];
  for (let n = rand(5); n > 0; n--) {
    if (rand(8) === 0) lines.push(pick(["# comment", "", "  ", "  # c", "...", "%YAML 1.2", "- a", "  x: 1"]));
    lines.push(pick(indents.slice(0, 2)) + (rand(10) ? pick(keys) : pick(words)) + pick([":", ":", ":", " :", "::"]) + value());
  }
  const front = pick(["---\n", "---\n", "---\n", "--- \n", "---x\n", "---\r\n"]);
  return front + lines.join(pick(["\n", "\n", "\r\n"])) + pick(["\n---\nbody\n", "\n---", "\n----\n", "\n---  \n# Body\ntext", ""]);
}

// wellFormed is front matter as people write it: each key once, its
// value one of the shapes a SKILL.md has, so that most cases have fields.
function text() { return Array.from({ length: rand(4) + 1 }, () => pick(words.filter((w) => /^[\w .,'é-]+$/.test(w)) )).join(" "); }
function wellValue() {
  const t = text();
  switch (rand(9)) {
    case 0: return " " + JSON.stringify(t + pick(["", "\n", "\u00e9", '"', "\\", "\t"])).replace(/\\\\n/g, "\\n");
    case 1: return " '" + t.replace(/'/g, "''") + "'";
    case 2: return " " + pick(["|", ">", "|-", ">-", "|+", ">+", "|2", ">2"]) + "\n" + Array.from({ length: rand(4) + 1 }, () => pick(["  ", "  ", "    "]) + text()).join(pick(["\n", "\n\n", "\n  \n"])) + pick(["", "\n", "\n\n"]);
    case 3: return " " + t + "\n  " + text() + pick(["", "\n\n  " + text()]);
    case 4: return "\n  " + t + "\n  " + text();
    case 5: return " " + pick(["[a, b]", "{k: v}", "[]", "123", "true", "null", "", "~", "false", "1.5"]);
    case 6: return "\n" + pick(["  - a\n  - b", "- a\n- b", "  k: v\n  j:\n    - x\n    - y: z\n      w: 1", "  k: 'v'\n  j: |\n    t\n    u"]);
    default: return " " + t + pick(["", "", " # a comment", "  "]);
  }
}
function wellFormed() {
  const ks = ["name", "description", "disable-model-invocation", "license", "metadata", "allowed-tools"].filter(() => rand(4) > 0);
  const lines = ks.map((k) => k + ":" + (k === "disable-model-invocation" && rand(2) ? " " + pick(["true", "True", "TRUE", "false", "'true'", "yes", "true # c"]) : wellValue()));
  if (rand(4) === 0) lines.splice(rand(lines.length + 1), 0, pick(["# comment", "", "  # indented comment"]));
  return "---\n" + lines.join("\n") + "\n---\n" + pick(["", "# Body\n\ntext\n", "\n\nbody  \n"]);
}

const out = [];
for (let k = 0; k < Number(count); k++) {
  const input = rand(2) ? wellFormed() : doc();
  try {
    const { frontmatter: f, body } = parseFrontmatter(input);
    const str = (v) => (typeof v === "string" ? v : null);
    out.push({ input, name: str(f.name), description: str(f.description), hidden: f["disable-model-invocation"] === true, body });
  } catch (e) {
    out.push({ input, error: String(e.message).split("\n")[0] });
  }
}
console.log(JSON.stringify(out, null, 1));
