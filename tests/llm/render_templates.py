#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Renders chat templates with Jinja2 the way Hugging Face transformers does.

This is the reference that kiln's own Jinja subset (src/llm/chat_template.h) is checked
against, run with Debian's /usr/bin/python3 and python3-jinja2 (3.1.2 on Debian 12; later
3.1.x releases differ from it in one corner of variable scoping, see branch_update in
jinja2/idtracking.py). The environment is jinja2.sandbox.ImmutableSandboxedEnvironment with
trim_blocks and lstrip_blocks, the loopcontrols extension and the {% generation %} block, and
the globals and filter that transformers adds (raise_exception, strftime_now, a tojson that
does not escape HTML and takes json.dumps's indent / separators / sort_keys). The variables
are those transformers passes: messages, tools and documents (None unless given),
add_generation_prompt, the special tokens, and any extras.

Three ways to run it:

  render_templates.py --request REQ.json --output OUT.json
      REQ.json: {"cases": [CASE, ...]}; CASE: {"template": TEXT} or {"template_file": PATH},
      plus "messages" (a list), "add_generation_prompt", "bos_token", "eos_token",
      "variables" (an object of further globals), "now" (seconds since the epoch for
      strftime_now; absent means the current time).
      OUT.json: a list with one entry per case: {"ok": true, "text": ...} or
      {"ok": false, "error_type": ..., "error": ...}. Exit status 0 unless the request itself
      is malformed.

  render_templates.py --random-cases N --seed S --output OUT.json
      generates N random templates over the Jinja subset kiln implements (expressions,
      filters, tests, methods, loops, whitespace control) and renders them: OUT.json is
      {"cases": [CASE, ...], "results": [...]} in the formats above.

  render_templates.py TEMPLATE.jinja MESSAGES.json [--add-generation-prompt] [--bos S] [--eos S]
      prints the rendering of one conversation (for people).

Exit status 77 (the CTest skip code) when jinja2 is not installed.
"""

import argparse
import copy
import datetime
import json
import random
import sys

try:
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    import jinja2.sandbox
except ImportError:  # pragma: no cover - depends on the machine
    print("render_templates.py: python3-jinja2 is not installed", file=sys.stderr)
    sys.exit(77)


class GenerationBlock(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: transformers marks the assistant's text with it
    (for assistant-token masks); rendering just outputs the body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def make_environment(now):
    """The environment transformers compiles chat templates in (see the module docstring)."""

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        # Unlike Jinja's own tojson: no HTML escaping, and json.dumps's options are exposed.
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    def strftime_now(fmt):
        moment = datetime.datetime.now() if now is None else datetime.datetime.fromtimestamp(now)
        return moment.strftime(fmt)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_case(case):
    if "template" in case:
        source = case["template"]
    else:
        with open(case["template_file"], encoding="utf-8", newline="") as f:
            source = f.read()
    env = make_environment(case.get("now"))
    # A copy: a few Jinja2 filters modify their argument in place (|indent on a list).
    variables = copy.deepcopy(case.get("variables", {}))
    kwargs = {
        "messages": copy.deepcopy(case.get("messages", [])),
        "tools": None,
        "documents": None,
        "add_generation_prompt": bool(case.get("add_generation_prompt", False)),
        "bos_token": case.get("bos_token", ""),
        "eos_token": case.get("eos_token", ""),
    }
    kwargs.update(variables)
    try:
        template = env.from_string(source)
        return {"ok": True, "text": template.render(**kwargs)}
    except Exception as e:  # every failure is an expected outcome to compare with kiln's
        return {"ok": False, "error_type": type(e).__name__, "error": str(e)}


# --- random templates ---------------------------------------------------------------------------
# Templates built at random from the constructs kiln implements, for a differential test against
# Jinja2. They avoid what kiln documents as different (Python's memory addresses in the text of
# generators and methods, range and dict views printed as such, ints past 64 bits, complex
# numbers, printf-style %, slices of literals, which Jinja's optimizer folds), so that any
# difference is a bug.

RANDOM_VARIABLES = {
    "s": "  Hello, World!\n\ttab \u00e9t\u00e9 \u65e5 ",
    "t": "a,b,,c",
    "n": 7, "m": -3, "f": 2.5, "g": -0.1, "b": True, "z": None,
    "l": [3, 1, 2], "e": [], "w": ["x", "Y", "z"],
    "d": {"a": 1, "b": [1, 2], "c": {"x": "y"}, "role": "user"},
    "ms": [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"},
           {"role": "assistant", "content": "<think>r</think>A"}, {"role": "user", "content": "U2"}],
}
_NAMES = list(RANDOM_VARIABLES) + ["u"]
_STRINGS = ["''", "'a'", "'ab c'", "' x '", "'\\n'", "'\u00e9'", "\"q'q\"", "'{{x}}'", "','", "'A'",
            "'abc'", "'</think>'", "'\u00c9t\u00c9'"]
_PLAIN_FILTERS = ["trim", "upper", "lower", "capitalize", "title", "length", "count", "first", "last",
                  "string", "int", "float", "abs", "tojson", "sort", "safe", "e", "join", "default",
                  "min", "max", "sum", "dictsort", "list"]
_GENERATOR_FILTERS = ["reverse", "items", "unique", "select('odd')", "reject('none')",
                      "selectattr('role', 'equalto', 'user')", "map(attribute='role')",
                      "map('upper')", "rejectattr('content')"]
_TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping",
          "iterable", "sequence", "boolean", "true", "false", "odd", "even", "lower", "upper"]
_TESTS_WITH_ARG = ["equalto", "eq", "ne", "gt", "lt", "ge", "le", "in", "divisibleby", "sameas"]
_STR_METHODS = [("strip", ["", "'x '"]), ("lstrip", ["'\\n'", "' H'"]), ("rstrip", ["", "' '"]),
                ("split", ["", "','", "',', 1", "None, 1"]), ("rsplit", ["','", "',', 1"]),
                ("startswith", ["'a'", "('H', ' ')"]), ("endswith", ["'c'", "' '"]),
                ("upper", [""]), ("lower", [""]), ("title", [""]), ("capitalize", [""]),
                ("replace", ["'a', 'b'", "'', '-'", "'l', 'L', 1"]), ("find", ["'l'", "'zz'"]),
                ("count", ["'l'"]), ("join", ["['a', 'b']", "w"]), ("isdigit", [""]),
                ("splitlines", [""]), ("partition", ["','"])]
_METHODS_OF = {"s": _STR_METHODS, "t": _STR_METHODS,
               "d": [("get", ["'a'", "'zz'", "'zz', 0"])],
               "l": [("index", ["1"]), ("count", ["3"])], "w": [("index", ["'x'"])]}


class _RandomTemplates:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def literal(self, depth):
        r = self.r
        k = r.randrange(8)
        if k == 0:
            return str(r.choice([0, 1, 2, -1, 7, 10, 100]))
        if k == 1:
            return r.choice(["0.5", "1.0", "2.25", "1e3", "3.0e-5", "1e16", "0.1"])
        if k == 2:
            return r.choice(["true", "false", "none", "True", "None"])
        if k == 3 and depth < 3:
            return "[" + ", ".join(self.expr(depth + 1) for _ in range(r.randrange(4))) + "]"
        if k == 4 and depth < 3:
            items = (f"{r.choice(_STRINGS)}: {self.expr(depth + 1)}" for _ in range(r.randrange(3)))
            return "{" + ", ".join(items) + "}"
        return r.choice(_STRINGS)

    def postfix(self, depth):
        r = self.r
        if r.randrange(2):
            e = r.choice(_NAMES)
            for _ in range(r.randrange(3)):
                k = r.randrange(4)
                if k == 0:
                    e += "." + r.choice(["a", "b", "c", "x", "role", "content", "length", "0"])
                elif k == 1:
                    e += "[" + r.choice(["0", "-1", "1", "'a'", "'role'", "5", "n", "-2"]) + "]"
                elif k == 2:
                    e += "[" + r.choice(["1:", ":-1", "::-1", "1:3", "::2", ":", "-2:", "5:1:-1"]) + "]"
                elif e in _METHODS_OF:
                    name, args = r.choice(_METHODS_OF[e])
                    e += f".{name}({r.choice(args)})"
        elif depth < 4 and r.randrange(3) == 0:
            e = "(" + self.expr(depth + 1) + ")"
        else:
            e = self.literal(depth)
        for _ in range(r.randrange(3)):
            if r.randrange(3):
                f = r.choice(_PLAIN_FILTERS)
                arg = {"join": ["", "(', ')"], "default": ["", "('dflt')", "('d', true)"],
                       "tojson": ["", "(indent=2)", "(sort_keys=true)"],
                       "int": ["", "(5)"]}.get(f, [""])
                e += f"|{f}{r.choice(arg)}"
            else:
                e += f"|{r.choice(_GENERATOR_FILTERS)}|list"
        return e

    def expr(self, depth=0):
        r = self.r
        if depth > 4:
            return self.postfix(depth)
        k = r.randrange(11)
        if k < 4:
            return self.postfix(depth)
        if k == 4:
            op = r.choice(["+", "-", "*", "/", "//", "~"])
            return f"{self.postfix(depth)} {op} {self.postfix(depth)}"
        if k == 5:
            op = r.choice(["==", "!=", "<", ">", "<=", ">=", "in", "not in"])
            return f"{self.postfix(depth)} {op} {self.postfix(depth)}"
        if k == 6:
            return f"{self.postfix(depth)} {r.choice(['and', 'or'])} {self.postfix(depth)}"
        if k == 7:
            return f"not {self.postfix(depth)}"
        if k == 8:
            test = r.choice(_TESTS + _TESTS_WITH_ARG)
            arg = f" {self.literal(depth + 1)}" if test in _TESTS_WITH_ARG else ""
            return f"{self.postfix(depth)} is {r.choice(['', 'not '])}{test}{arg}"
        if k == 9:
            return f"{self.postfix(depth)} if {self.postfix(depth)} else {self.postfix(depth)}"
        return f"-{r.choice(_NAMES)}"

    def space(self):
        return self.r.choice(["", " ", "\n", "  \n", "\n  ", "\t", " \n\n "])

    def tag(self, body):
        r = self.r
        return r.choice(["{%", "{%-", "{%+"]) + f" {body} " + r.choice(["%}", "-%}", "+%}"])

    def statement(self, depth=0):
        r = self.r
        k = r.randrange(8 if depth < 3 else 3)
        if k == 0:
            return self.space() + r.choice(["text", "a b", "x", "\u00e9"]) + self.space()
        if k == 1:
            return r.choice(["{{", "{{-"]) + f" {self.expr()} " + r.choice(["}}", "-}}"]) + self.space()
        if k == 2:
            return self.tag(f"set {r.choice(['q', 'v', 'n'])} = {self.expr()}") + self.space()
        if k == 3:
            out = self.tag(f"if {self.expr()}") + self.body(depth)
            if r.random() < 0.3:
                out += self.tag(f"elif {self.expr()}") + self.body(depth)
            if r.random() < 0.5:
                out += self.tag("else") + self.body(depth)
            return out + self.tag("endif") + self.space()
        if k == 4:
            iterable = r.choice(["l", "w", "ms", "e", "d", "s", "range(3)", "d.items()", "u",
                                 "[1, [2, 3]]", "'ab'"])
            target = "k, x" if iterable == "d.items()" else r.choice(["x", "item"])
            cond = f" if {self.expr()}" if r.random() < 0.2 else ""
            out = self.tag(f"for {target} in {iterable}{cond}") + self.body(depth)
            if r.random() < 0.2:
                out += self.tag("else") + self.body(depth)
            return out + self.tag("endfor") + self.space()
        if k == 5:
            return (self.tag("set ns = namespace(a=1)") + self.tag(f"set ns.a = {self.expr()}") +
                    "{{ ns.a }}")
        if k == 6:
            return "{# c #}" + self.space()
        return "{{ loop.index ~ loop.first ~ loop.last ~ loop.length ~ loop.revindex }}"

    def body(self, depth):
        return "".join(self.statement(depth + 1) for _ in range(self.r.randrange(1, 3)))

    def template(self):
        return "".join(self.statement() for _ in range(self.r.randrange(1, 5)))


def random_cases(count, seed):
    generator = _RandomTemplates(seed)
    return [{"template": generator.template(), "variables": RANDOM_VARIABLES, "messages": []}
            for _ in range(count)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--request", help="JSON request file (batch mode)")
    parser.add_argument("--output", help="JSON output file (batch mode)")
    parser.add_argument("template", nargs="?", help="template file (single mode)")
    parser.add_argument("messages", nargs="?", help="messages JSON file (single mode)")
    parser.add_argument("--random-cases", type=int, help="generate and render N random templates")
    parser.add_argument("--seed", type=int, default=1, help="seed of --random-cases")
    parser.add_argument("--add-generation-prompt", action="store_true")
    parser.add_argument("--bos", default="")
    parser.add_argument("--eos", default="")
    args = parser.parse_args()

    if args.request or args.random_cases is not None:
        if args.request:
            with open(args.request, encoding="utf-8") as f:
                request = json.load(f)
            results = [render_case(case) for case in request["cases"]]
            text = json.dumps(results, ensure_ascii=True)
        else:
            cases = random_cases(args.random_cases, args.seed)
            results = [render_case(case) for case in cases]
            text = json.dumps({"cases": cases, "results": results}, ensure_ascii=True)
        if args.output:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        else:
            sys.stdout.write(text)
        return 0

    if not args.template or not args.messages:
        parser.error("give --request, or a template and a messages file")
    with open(args.messages, encoding="utf-8") as f:
        messages = json.load(f)
    result = render_case(
        {
            "template_file": args.template,
            "messages": messages,
            "add_generation_prompt": args.add_generation_prompt,
            "bos_token": args.bos,
            "eos_token": args.eos,
        }
    )
    if not result["ok"]:
        print(f"{result['error_type']}: {result['error']}", file=sys.stderr)
        return 1
    sys.stdout.write(result["text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
