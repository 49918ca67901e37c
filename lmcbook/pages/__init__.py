"""What serves exactly one page: its captions, tables and the numbers its prose quotes, one module per page.

``lmcbook.pages.mechanism`` serves ``notebooks/mechanism.py``, and so on.  What several pages share is
:mod:`lmcbook.regime`.
"""
