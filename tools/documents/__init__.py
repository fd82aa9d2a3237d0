"""Files people attach: format detection, hardened parsers (one module per format), and the document tools.

The parsers know nothing of Django; they run in a child process (`sandbox`) and write what the tools
read later into a content file (`content`).
"""
