"""Exercise 14 (search/beam.py:kernel_actions): seeded wrong answers, each a mistake a student makes."""

from kernel import KernelOptError, Opt, OptOps, prod
from search.beam import search_actions, search_limits


def _actions(k, whole_axis=True, macros=True, limits=True, real_axis=True, tc=True):
    import search.beam as beam  # the actions as they are now (the grader puts a log's in place)

    out, actions, (upcast_max, local_max) = [], search_actions() if tc else beam.ACTIONS, search_limits()
    for action in actions + (beam.MACROS if macros else []):
        opt, *more = action if isinstance(action, tuple) else (action,)
        if opt.axis is not None and opt.op is not OptOps.TC:
            axis = opt.real_axis(k) if real_axis else opt.axis
            whole = whole_axis and axis < k.shape_len and k.full_shape[axis] == opt.amt
            if axis >= k.shape_len or (whole and Opt(opt.op, axis, 0) in actions):
                continue
        k2 = k.copy()
        try:
            for step in (opt, *more):
                k2.apply_opt(step)
        except KernelOptError:
            continue
        tc_up = prod(k2.tensor_core.dims) // prod(n for _, n in k2.tensor_core.threads) if k2.tensor_core else 1
        colors = list(zip(k2.full_shape, k2.colors()))
        in_registers = prod(s for s, c in colors if c in ("magenta", "yellow")) // tc_up
        in_work_group = prod(s for s, c in colors if c in ("cyan", "green", "white"))
        if not limits or (in_registers <= upcast_max and in_work_group <= local_max):
            out.append(k2)
    return out


def whole_axis_kept(k):
    """An amount equal to the whole axis kept beside amount 0, which says the same: the same kernel twice."""
    return _actions(k, whole_axis=False)


def macros_left_out(k):
    """The two-step actions (PADTO then LOCAL) left out: only the single opts tried."""
    return _actions(k, macros=False)


def limits_not_applied(k):
    """Every kernel the opts accept kept, over BEAM_UPCAST_MAX registers or BEAM_LOCAL_MAX threads too."""
    return _actions(k, limits=False)


def axis_as_written(k):
    """The whole-axis check on the action's axis as written, not its real axis (UNROLL and GROUP count from the first
    reduce axis): an action skipped or kept by the size of another axis."""
    return _actions(k, real_axis=False)


def tensor_cores_left_out(k):
    """ACTIONS alone: the tensor-core actions search_actions() adds (at TC_OPT) never tried."""
    return _actions(k, tc=False)
