"""The HTML report of ``polymap report``: :mod:`.facts` gathers, :mod:`.page` renders, :mod:`.svg` draws."""
