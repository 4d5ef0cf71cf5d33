"""(family under construction)"""
