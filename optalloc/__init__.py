"""optalloc: a GPU batch allocator for research clusters (budgets + hierarchical fair share +
a time-slicing contract), solved each epoch as a mixed-integer program."""

__version__ = "0.1.0"
