"""The pure core: diffs, edits, anchors, findings, prompts. No I/O."""
