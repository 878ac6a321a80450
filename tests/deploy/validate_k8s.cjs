// SPDX-License-Identifier: Apache-2.0
// Validates Kubernetes objects against the Kubernetes API schemas of the npm packages
// kubernetes-models (core, apps, policy, autoscaling, batch, ...) and
// @kubernetes-models/prometheus-operator (ServiceMonitor), installed by `scripts/install-deps
// deploy` into build/deploy-node. Used by check_manifests.py.
//
//   node validate_k8s.cjs NODE_DIR < objects.json > results.json
//
// objects.json: [{"id": "...", "object": {...}, "model": "<module>"?}, ...]. Without "model" the
// module comes from the object's apiVersion and kind (a kind no package describes is an error);
// with it, the object is validated as that model (e.g. "kubernetes-models/v1/Container" for a
// container template inside a custom resource).
// results.json: [{"id": "...", "model": "<module>", "errors": ["..."]}, ...].
//
// Two checks per object:
//  1. the package's JSON-schema validation (required fields, types, enums, formats);
//  2. unknown fields: the schemas accept any extra property, which would let a misspelt field
//     (`readinesProbe`) through, and the API server would drop or refuse it. So every property
//     is also looked up in the model's TypeScript declarations (the .d.ts files the packages ship,
//     generated from the same OpenAPI documents), recursively.
"use strict";

const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const nodeDir = process.argv[2];
if (!nodeDir) {
  console.error("usage: node validate_k8s.cjs NODE_DIR < objects.json");
  process.exit(2);
}
const req = createRequire(path.join(path.resolve(nodeDir), "node_modules", "index.js"));

// ---------------------------------------------------------------------------------------------
// Which module describes an apiVersion/kind.

function moduleFor(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string") return null;
  const slash = apiVersion.indexOf("/");
  if (slash < 0) return `kubernetes-models/${apiVersion}/${kind}`;  // core group
  const group = apiVersion.slice(0, slash);
  const version = apiVersion.slice(slash + 1);
  if (group === "monitoring.coreos.com") {
    return `@kubernetes-models/prometheus-operator/${group}/${version}/${kind}`;
  }
  return `kubernetes-models/${group}/${version}/${kind}`;
}

// ---------------------------------------------------------------------------------------------
// A reader of the TypeScript declarations the packages ship: interfaces, type aliases, imports
// and export aliases, and the type expressions they use (object literals, Array<T>, unions,
// index signatures, references).

const PRIMITIVES = new Set(["string", "number", "boolean", "any", "unknown", "object", "null",
                            "undefined", "never", "true", "false", "bigint", "Date"]);

function tokenize(text) {
  text = text.replace(/\/\*[\s\S]*?\*\//g, " ").replace(/\/\/[^\n]*/g, " ");
  const re = /\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[A-Za-z_$][\w$]*|-?\d+(?:\.\d+)?|=>|\S)/gy;
  const out = [];
  let m;
  while ((m = re.exec(text)) !== null) {
    if (m[1] === undefined) break;
    out.push(m[1]);
  }
  return out;
}

function unquote(tok) {
  return tok[0] === '"' || tok[0] === "'" ? JSON.parse('"' + tok.slice(1, -1) + '"') : tok;
}

class Parser {
  constructor(tokens) {
    this.t = tokens;
    this.i = 0;
  }
  peek(k = 0) { return this.t[this.i + k]; }
  next() { return this.t[this.i++]; }
  eat(tok) {
    if (this.peek() === tok) { this.i++; return true; }
    return false;
  }
  expect(tok) {
    const got = this.next();
    if (got !== tok) throw new Error(`expected '${tok}', got '${got}' at token ${this.i - 1}`);
  }
  // type := ['|'] inter ('|' inter)*
  type() {
    this.eat("|");
    const alts = [this.inter()];
    while (this.eat("|")) alts.push(this.inter());
    return alts.length === 1 ? alts[0] : { k: "union", of: alts };
  }
  inter() {
    const parts = [this.postfix()];
    while (this.eat("&")) parts.push(this.postfix());
    return parts.length === 1 ? parts[0] : { k: "inter", of: parts };
  }
  postfix() {
    let t = this.primary();
    while (this.peek() === "[") {
      this.next();
      if (this.eat("]")) { t = { k: "arr", of: t }; continue; }
      this.type();  // indexed access: IX["kind"]
      this.expect("]");
      t = { k: "any" };
    }
    return t;
  }
  typeArgs() {
    const args = [];
    if (!this.eat("<")) return args;
    args.push(this.type());
    while (this.eat(",")) args.push(this.type());
    this.expect(">");
    return args;
  }
  primary() {
    const tok = this.next();
    if (tok === "{") return this.members("}");
    if (tok === "(") {
      const t = this.type();
      this.expect(")");
      return t;
    }
    if (tok === "import") {  // import("module").Name<...>
      this.expect("(");
      this.next();
      this.expect(")");
      while (this.eat(".")) this.next();
      this.typeArgs();
      return { k: "any" };
    }
    if (tok[0] === '"' || tok[0] === "'" || /^-?\d/.test(tok)) return { k: "any" };
    if (!/^[A-Za-z_$]/.test(tok)) throw new Error(`unexpected '${tok}' in a type`);
    let name = tok;
    while (this.eat(".")) name += "." + this.next();
    const args = this.typeArgs();
    if (name === "Array" || name === "ReadonlyArray") return { k: "arr", of: args[0] };
    if (name === "Record") return { k: "obj", props: {}, index: args[1], ext: [] };
    if (PRIMITIVES.has(name) || args.length > 0) return { k: "any" };
    return { k: "ref", name };
  }
  // members until `close`: `"name"?: type;`, `name: type;`, `[key: string]: type;`, methods.
  members(close) {
    const obj = { k: "obj", props: {}, index: null, ext: [] };
    while (!this.eat(close)) {
      if (this.peek() === undefined) throw new Error("unterminated object type");
      if (this.eat(";") || this.eat(",")) continue;
      if (this.peek() === "readonly" && this.peek(1) !== ":" && this.peek(1) !== "?") this.next();
      if (this.peek() === "[") {
        this.next();
        this.next();  // key name
        this.expect(":");
        this.type();
        this.expect("]");
        this.eat("?");
        this.expect(":");
        obj.index = this.type();
        continue;
      }
      const name = unquote(this.next());
      const optional = this.eat("?");
      if (this.peek() === "(" || this.peek() === "<") {  // a method: skip its signature
        this.skipSignature();
        continue;
      }
      this.expect(":");
      obj.props[name] = this.type();
      void optional;
    }
    return obj;
  }
  skipSignature() {
    let depth = 0;
    for (;;) {
      const tok = this.next();
      if (tok === undefined) return;
      if (tok === "(" || tok === "{" || tok === "<" || tok === "[") depth++;
      else if (tok === ")" || tok === "}" || tok === ">" || tok === "]") depth--;
      else if (tok === ";" && depth === 0) return;
    }
  }
}

// A .d.ts file: its interfaces and aliases by local name, imports, export aliases.
const files = new Map();

function loadDts(file) {
  if (files.has(file)) return files.get(file);
  const info = { file, decls: new Map(), imports: new Map(), exportsAs: new Map() };
  files.set(file, info);
  const p = new Parser(tokenize(fs.readFileSync(file, "utf8")));
  while (p.peek() !== undefined) {
    const tok = p.next();
    if (tok === "import" && p.peek() === "{") {
      p.next();
      const names = [];
      while (!p.eat("}")) {
        if (p.eat(",")) continue;
        const orig = p.next();
        const local = p.eat("as") ? p.next() : orig;
        names.push([local, orig]);
      }
      p.expect("from");
      const from = unquote(p.next());
      for (const [local, orig] of names) info.imports.set(local, { from, orig });
    } else if (tok === "export" && p.peek() === "{") {
      p.next();
      while (!p.eat("}")) {
        if (p.eat(",")) continue;
        const local = p.next();
        const alias = p.eat("as") ? p.next() : local;
        info.exportsAs.set(alias, local);
      }
    } else if (tok === "interface") {
      const name = p.next();
      p.typeArgs();
      const ext = [];
      if (p.eat("extends")) {
        do {
          let base = p.next();
          while (p.eat(".")) base += "." + p.next();
          p.typeArgs();
          ext.push(base);
        } while (p.eat(","));
      }
      p.expect("{");
      const obj = p.members("}");
      obj.ext = ext;
      info.decls.set(name, obj);
    } else if (tok === "type" && /^[A-Za-z_$]/.test(p.peek() || "") && p.peek(1) !== ":") {
      const name = p.next();
      p.typeArgs();
      if (!p.eat("=")) continue;
      info.decls.set(name, p.type());
      p.eat(";");
    }
  }
  return info;
}

function resolveModuleDts(fromFile, spec) {
  if (spec.startsWith(".")) {
    const base = path.resolve(path.dirname(fromFile), spec);
    for (const f of [base + ".d.ts", path.join(base, "index.d.ts")]) {
      if (fs.existsSync(f)) return f;
    }
    return null;
  }
  try {
    const js = req.resolve(spec);
    const dts = js.replace(/\.(c|m)?js$/, ".d.ts");
    if (fs.existsSync(dts)) return dts;
  } catch (e) {
    // fall through
  }
  const direct = path.join(path.resolve(nodeDir), "node_modules", spec + ".d.ts");
  return fs.existsSync(direct) ? direct : null;
}

// The type named `name` in `file`, or null when it cannot be found (treated as "anything").
function lookup(file, name, seen = new Set()) {
  const key = file + "#" + name;
  if (seen.has(key)) return null;
  seen.add(key);
  const info = loadDts(file);
  if (info.decls.has(name)) return { node: info.decls.get(name), file };
  if (info.exportsAs.has(name) && info.exportsAs.get(name) !== name) {
    return lookup(file, info.exportsAs.get(name), seen);
  }
  if (info.imports.has(name)) {
    const { from, orig } = info.imports.get(name);
    const target = resolveModuleDts(file, from);
    return target ? lookup(target, orig, seen) : null;
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// Unknown-field check of a value against a type.

function isPlainObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

// The members of an object type with those of the interfaces it extends; `open` when one of
// them could not be resolved (then any field is accepted).
function flatten(node, file) {
  const props = Object.assign({}, node.props);
  const files = {};
  for (const k of Object.keys(node.props)) files[k] = file;
  let index = node.index ? { t: node.index, file } : null;
  let open = false;
  for (const base of node.ext || []) {
    const found = lookup(file, base);
    if (!found || found.node.k !== "obj") { open = true; continue; }
    const f = flatten(found.node, found.file);
    for (const k of Object.keys(f.props)) {
      if (!(k in props)) { props[k] = f.props[k]; files[k] = f.files[k]; }
    }
    index = index || f.index;
    open = open || f.open;
  }
  return { props, files, index, open };
}

function check(value, type, file, where, errors, depth = 0) {
  if (depth > 64 || !type) return;
  switch (type.k) {
    case "any":
      return;
    case "ref": {
      const found = lookup(file, type.name);
      if (found) check(value, found.node, found.file, where, errors, depth + 1);
      return;
    }
    case "arr":
      if (Array.isArray(value)) {
        value.forEach((v, i) => check(v, type.of, file, `${where}/${i}`, errors, depth + 1));
      }
      return;
    case "union":
    case "inter": {
      // The first alternative that takes the value without unknown fields; else the first
      // object (or array) alternative's complaints.
      let firstErrors = null;
      for (const alt of type.of) {
        const e = [];
        check(value, alt, file, where, e, depth + 1);
        if (e.length === 0) return;
        if (firstErrors === null) firstErrors = e;
      }
      if (firstErrors) errors.push(...firstErrors);
      return;
    }
    case "obj": {
      if (!isPlainObject(value)) return;
      const f = flatten(type, file);
      const noMembers = Object.keys(f.props).length === 0 && !f.index;
      for (const [k, v] of Object.entries(value)) {
        if (k in f.props) {
          check(v, f.props[k], f.files[k], `${where}/${k}`, errors, depth + 1);
        } else if (f.index) {
          check(v, f.index.t, f.index.file, `${where}/${k}`, errors, depth + 1);
        } else if (!f.open && !noMembers) {
          errors.push(`${where}/${k}: unknown field (not in the API schema)`);
        }
      }
      return;
    }
    default:
      return;
  }
}

// The interface the model class implements: `I<Kind>` in the module's .d.ts.
function unknownFields(moduleName, object) {
  const dts = resolveModuleDts(path.join(path.resolve(nodeDir), "node_modules", "x"), moduleName);
  if (!dts) return [`no TypeScript declarations for ${moduleName}`];
  const kind = moduleName.slice(moduleName.lastIndexOf("/") + 1);
  const found = lookup(dts, "I" + kind);
  if (!found) return [`no interface I${kind} in ${dts}`];
  const errors = [];
  check(object, found.node, found.file, "", errors);
  return errors;
}

// ---------------------------------------------------------------------------------------------

function validate(entry) {
  const obj = entry.object;
  const moduleName = entry.model || moduleFor(obj && obj.apiVersion, obj && obj.kind);
  const result = { id: entry.id, model: moduleName, errors: [] };
  if (!moduleName) {
    result.errors.push("no apiVersion/kind");
    return result;
  }
  let mod;
  try {
    mod = req(moduleName);
  } catch (e) {
    result.errors.push(`no schema for ${moduleName} in kubernetes-models (${e.code || e.message})`);
    return result;
  }
  const kind = moduleName.slice(moduleName.lastIndexOf("/") + 1);
  const Model = mod[kind];
  if (typeof Model !== "function") {
    result.errors.push(`${moduleName} exports no model ${kind}`);
    return result;
  }
  try {
    new Model(JSON.parse(JSON.stringify(obj))).validate();
  } catch (e) {
    for (const line of String(e.message).split("\n")) if (line.trim()) result.errors.push(line);
  }
  try {
    result.errors.push(...unknownFields(moduleName, obj));
  } catch (e) {
    result.errors.push(`reading the declarations of ${moduleName} failed: ${e.message}`);
  }
  return result;
}

const input = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(input.map(validate), null, 1) + "\n");
