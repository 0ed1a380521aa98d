"""The Streamlit helpers the pages share (not pages themselves; only ``pages/``, ``app.py`` and
this package import streamlit). One concern a module, each importing only those below it:

    nav       the page registry in teaching order, lessons, their links, the URL's state
    signin    who is asking: the identity provider or the instructor's passphrase
    models    a finished run's model for Results and Inside, an uploaded picture
    data      the data set (decoded once per server process) and the job queue
    widgets   number boxes that answer in the student's language; a chart's clicked cell
    messages  what a callback has to say, kept for the next run
    a11y      what assistive technology needs that is no widget (document language, CSS)
    language  the student's language (chosen, or the browser's), its switch, the translator,
              numbers and errors in it
    session   this browser's session id, its cookies, what the host's secrets say
    internals the two workarounds that reach into Streamlit's internals (pinned version)
"""
