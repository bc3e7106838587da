"""Task-list loops: task files (``files``) and a list's progress in the loop step (``progress``).
docs/tasks.md, docs/design/task-lists.md."""
