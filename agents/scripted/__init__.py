"""Scripted sellers and buyers: strategies that need no training."""
