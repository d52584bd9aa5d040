"""What the CLI draws on a terminal: output lines, the picker, progress, the clipboard."""
