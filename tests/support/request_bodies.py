"""Hypothesis strategies for what a client may send as a job's request: each field mostly
of its own type, with text PostgreSQL cannot store and numbers past any column."""

from hypothesis import strategies as st

# what PostgreSQL cannot store as text, and text that is unusual but fine
_NASTY = ["\x00", "a\x00b", "\ud800", "x\udfff", "\U0001f98a", "\u202e", "", " ", "default",
          "H100", "é" * 300]
text = st.one_of(st.text(max_size=40), st.sampled_from(_NASTY))
numbers = st.one_of(st.integers(), st.integers(-3, 70), st.sampled_from([2**31, 2**63, 10**40]),
                    st.floats(allow_nan=False, allow_infinity=False))
scalars = st.one_of(st.none(), st.booleans(), numbers, text)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)), max_leaves=12)
_FIELDS = {
    "prompt": text, "gpus": numbers, "params": st.dictionaries(text, values, max_size=4),
    "gpu_types": st.lists(text, max_size=9), "min_gpu_memory_mb": numbers, "region": text,
    "time_limit_s": numbers, "checkpointable": st.booleans(), "preemptible": st.booleans(),
    "project": text, "min_gpus": numbers, "urgency_s": numbers, "max_retries": numbers,
    "after": st.lists(numbers, max_size=4), "start_within_s": numbers,
    "labels": st.one_of(st.dictionaries(text, text, max_size=4),
                        st.dictionaries(text, values, max_size=3)),
}
# one to three fields set, each mostly to a value of its own type, so that a bad value often
# travels with good ones and reaches the service and the database
field = st.sampled_from(sorted(_FIELDS)).flatmap(
    lambda name: st.tuples(st.just(name), st.one_of(_FIELDS[name], _FIELDS[name], values)))
bodies = st.lists(field, max_size=3).map(dict)
with_prompt = st.builds(lambda b, extra: {"prompt": "x", **extra, **b},
                        bodies, st.dictionaries(text, values, max_size=1))
