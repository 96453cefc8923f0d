"""The Lua of av_state's historical variants (``stores.av_state.variants``).

Each file is one of the shipped scripts as it was before a fix, with a
comment saying what the fix changed. They live in a package of their own so
``stores.av_state.SCRIPTS`` holds exactly what the fixed store runs; a variant
puts one of these in place of its shipped script by name
(``SCRIPTS.replacing(refund=...)``), so the lab still calls it ``refund``.
"""
