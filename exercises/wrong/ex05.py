"""Exercise 5 (kernel.py:Kernel.colors): seeded wrong answers, each a mistake a student makes."""


def white_green_swapped(self):
    """A grouped reduce axis white, and an upcast-in-the-middle one green: the two swapped."""
    fr, up, mid = self.first_reduce, self.shape_len - self.upcasted, self.upcast_in_mid_reduce_axes
    colors = ["BLUE" if self.dont_use_locals else "blue"] * self.global_dims + ["cyan"] * self.local_dims
    colors += ["green" if i in mid else "white" for i in range(fr, fr + self.group_for_reduces)]
    colors += ["red"] * (up - (fr + self.group_for_reduces))
    colors += ["magenta" if s != o else "yellow" for s, o in zip(self.full_shape[up:], self.sts[0].shape[up:])]
    return colors


def magenta_yellow_inverted(self):
    """An upcast axis magenta where the output keeps it and yellow where it is reduced: the test inverted."""
    fr, up, mid = self.first_reduce, self.shape_len - self.upcasted, self.upcast_in_mid_reduce_axes
    colors = ["BLUE" if self.dont_use_locals else "blue"] * self.global_dims + ["cyan"] * self.local_dims
    colors += ["white" if i in mid else "green" for i in range(fr, fr + self.group_for_reduces)]
    colors += ["red"] * (up - (fr + self.group_for_reduces))
    colors += ["yellow" if s != o else "magenta" for s, o in zip(self.full_shape[up:], self.sts[0].shape[up:])]
    return colors


def nolocals_ignored(self):
    """The global axes always blue: BLUE, which says NOLOCALS was applied, never shown."""
    fr, up, mid = self.first_reduce, self.shape_len - self.upcasted, self.upcast_in_mid_reduce_axes
    colors = ["blue"] * self.global_dims + ["cyan"] * self.local_dims
    colors += ["white" if i in mid else "green" for i in range(fr, fr + self.group_for_reduces)]
    colors += ["red"] * (up - (fr + self.group_for_reduces))
    colors += ["magenta" if s != o else "yellow" for s, o in zip(self.full_shape[up:], self.sts[0].shape[up:])]
    return colors
