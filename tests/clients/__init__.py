"""The contract suite: the real agent CLIs (pinned in ``clients/package.json``) against local mock
model APIs."""
