"""The dashboards toolset: a catalogue of BI dashboards the agent searches, inspects and changes (docs/tools.md)."""
