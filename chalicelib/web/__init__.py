"""Everything the server shows a browser, framework-free: ``app.py`` only moves bytes.

- ``view``: the web view (``/web``), a signed-in person's packets, teams and links;
- ``device``: the device flow's OAuth endpoints and its verification page (RFC 8628);
- ``cognito``: Amazon Cognito's managed login, the identity provider on AWS;
- ``render``: the HTML, with every piece of packet text escaped.

Nothing is imported here, so a route that needs one of them loads only that one.
"""
