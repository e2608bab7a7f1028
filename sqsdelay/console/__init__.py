"""The web console (`sqsdelay console`, extra `sqsdelay[console]`): see docs/console.md."""
