#!/usr/bin/env python3
"""Writes the bash completion from its template: gen.py TENSORFS TEMPLATE OUTPUT.  The -o
option names of each command come from the option table (`tensorfs __options COMMAND`)."""
import re
import subprocess
import sys

tensorfs, template, output = sys.argv[1:4]
with open(template) as f:
    text = f.read()
for cmd in ("mount", "convert", "repack"):
    names = subprocess.run([tensorfs, "__options", cmd], check=True, capture_output=True,
                           text=True).stdout.strip()
    text = text.replace("@%s_OPTIONS@" % cmd.upper(), names)
left = re.findall(r"@[A-Z_]+_OPTIONS@", text)
if left:
    sys.exit("gen.py: %s: no command fills %s" % (template, ", ".join(left)))
with open(output, "w") as f:
    f.write(text)
