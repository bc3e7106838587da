"""What ends or continues a loop: the signal table, guards and their facts, stop policies (hooks), adaptive
limits."""
