"""search/: let the device choose a kernel's opts, by beam search (tinygrad 0.9.1's engine/search.py; docs/search.md
says where ours differs, and why). Read it in the order a search runs:

- beam.py: the actions, the rounds (each its model's cut, compiles and timing), the lines, the runoff, the disk cache;
- cost.py: what the search knows before it builds a kernel (the cost model, the device's measured limits) and the
  log of what it weighed and timed (tools/replay_search.py replays it);
- compilers.py: the search's builds, in helper processes where a compiler that crashes fails that build alone;
- __main__.py: `python -m search NAME`, the command line.

`from search import search, beam_search` is its public face."""

from search.beam import SearchError, SearchResult, SearchRound, beam_search, search

__all__ = ["SearchError", "SearchResult", "SearchRound", "beam_search", "search"]
