"""What serves exactly one page: its captions, tables and the numbers its prose quotes, one module per page.

``lmcbook.pages.mechanism`` serves ``notebooks/mechanism.py``, and so on.  A sentence that several pages share
sits beside the function whose concept it describes (:mod:`lmcbook.regime`, :mod:`lmcbook.experiments_noise`).
"""
