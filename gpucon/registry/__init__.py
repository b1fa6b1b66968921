"""The scheduler registry contract in one place: key names (``keys``), the one parser of a
backend hash (``parse``), the backend state machine (``states``) and the read that does not
block Redis (``read``). Sources, controls, actions and the lab scheduler all go through it.
"""
