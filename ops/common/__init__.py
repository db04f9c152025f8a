"""Pieces shared by the operators: status-code helpers, layouts, masks and sparse modes, quantisation."""
