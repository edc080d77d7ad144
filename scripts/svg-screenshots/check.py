#!/usr/bin/env python3
"""Reads the DOM chromium dumped for one measured SVG (stdin) and fails naming every text that
runs past the window's edge, past its own frame (the flame graphs' labels), or into another
text that is not a frame label (a title into "Search", two "FULL" labels)."""
import html
import json
import re
import sys

SLACK = 1.0  # px: sub-pixel rounding of the boxes


def main():
    name = sys.argv[1]
    dom = sys.stdin.read()
    # The last: the measuring script's own comment names the element too.
    found = re.findall(r'<desc id="bbox-report">(.*?)</desc>', dom, re.S)
    if not found:
        print(f"{name}: no measurement in the dumped DOM (did the page load?)")
        return 1
    report = json.loads(html.unescape(found[-1]))
    width, texts = report["width"], report["texts"]
    problems = []
    for text in texts:
        label = f"{text['text'][:60]!r}"
        if text["left"] < -SLACK or text["right"] > width + SLACK:
            problems.append(f"{label} spans {text['left']:.0f}–{text['right']:.0f} px of {width:.0f}")
        frame = text["frame"]
        if frame and (text["left"] < frame[0] - SLACK or text["right"] > frame[1] + SLACK):
            problems.append(f"{label} runs past its frame ({frame[0]:.0f}–{frame[1]:.0f} px)")
    loose = [text for text in texts if not text["frame"]]
    for index, first in enumerate(loose):
        for second in loose[index + 1:]:
            apart = (first["right"] <= second["left"] + SLACK or second["right"] <= first["left"] + SLACK
                     or first["bottom"] <= second["top"] + SLACK or second["bottom"] <= first["top"] + SLACK)
            if not apart:
                problems.append(f"{first['text'][:50]!r} overlaps {second['text'][:50]!r}")
    for problem in problems:
        print(f"{name}: {problem}")
    print(f"{name}: {len(texts)} texts measured in a window {width:.0f} px wide, {len(problems)} problems")
    return 1 if problems else 0


sys.exit(main())
