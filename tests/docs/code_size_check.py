#!/usr/bin/env python3
"""scripts/code_size.py counts what it says (CTest docs.code_size): on a planted C text, comments
and blank lines are not code and a function's lines run from its name to its closing brace; a
declaration is not a function; a host file counts as lesson code only when its first line says
so; a planted longer function is found as the largest; the tree's
table is produced; a bad flag is one line and exit 2. Prints PASS."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "code_size.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import code_size  # noqa: E402

TEXT = """/* a header comment
   over two lines */
#include <stdio.h>

int declared(int a);
static int add(int a, int b)
{
    // a line comment
    return a + b;
}

int main(void) {
    int x = add(1, 2);

    printf("%d\\n", x);
    return 0;
}
"""


def main():
    errors = []
    code = code_size.code_lines(TEXT)
    if len(code) != 11:
        errors.append(f"code lines: {len(code)}, expected 11 (comments and blanks dropped)")
    fns = dict(code_size.functions(TEXT))
    if fns != {"add": 5, "main": 6}:
        errors.append(f"functions: {fns}, expected add 5 and main 6 lines")
    marked = "/* ring.c \u2014 lesson code: the schedule */\n" + TEXT
    if not code_size.is_lesson_host(marked) or code_size.is_lesson_host(TEXT) or \
            code_size.is_lesson_host("/* x.c */\n/* lesson code */\n"):
        errors.append("the lesson-code mark: read from anywhere but the first line")
    done = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True)
    if done.returncode != 0 or "09_decode" not in done.stdout or "all" not in done.stdout:
        errors.append(f"the table: exit {done.returncode}, {done.stdout[-200:]!r}")
    bad = subprocess.run([sys.executable, SCRIPT, "--jsn"], capture_output=True, text=True)
    if bad.returncode != 2 or len(bad.stderr.strip().splitlines()) != 1:
        errors.append(f"a bad flag: exit {bad.returncode}, {bad.stderr!r}")
    for e in errors:
        print("FAIL:", e)
    if not errors:
        print("PASS")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
