"""Reading Claude Code transcripts: a turn's tokens, tools and files, the last text, the todo list."""
